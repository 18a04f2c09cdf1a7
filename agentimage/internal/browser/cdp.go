package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// pingInterval is how often the relays ping both ends; a peer that does not answer within pingTimeout is gone.
const (
	pingInterval = 25 * time.Second
	pingTimeout  = 20 * time.Second
)

// serveDiscovery proxies Chromium's /json/* endpoints (version, list, new, activate, close) and rewrites the URLs in
// their answers for the caller.
func (b *Browser) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	if _, err := b.ready(r.Context()); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/cdp")
	if path == "" {
		path = "/json/version"
	}
	method := http.MethodGet
	// Chromium only accepts PUT for /json/new (since 111); clients written before that still GET it.
	if strings.HasPrefix(strings.TrimSuffix(path, "/"), "/json/new") {
		method = http.MethodPut
	}
	target := b.cdpBase() + path
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(r.Context(), method, target, nil)
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "bad discovery path: %v", err))
		return
	}
	resp, err := b.http.Do(req)
	if err != nil {
		e := agentapi.Errorf(agentapi.CodeUnavailable, "asking chromium %s: %v", path, err)
		e.Retryable = true
		agentapi.WriteError(w, e)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		agentapi.WriteError(w, fmt.Errorf("reading chromium's %s: %w", path, err))
		return
	}
	var v any
	if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &v) == nil {
		externalFrom(r).rewriteTargets(v)
		agentapi.WriteJSON(w, http.StatusOK, v)
		return
	}
	// Chromium's plain-text answers (unknown target, bad verb) pass through with their status.
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// serveDevtools relays WS /cdp/devtools/{browser|page}/{id} and WS /cdp (the browser target) to Chromium. Plain HTTP
// under /cdp/devtools/ is Chromium's bundled DevTools frontend, proxied as is; plain GET /cdp is /json/version.
func (b *Browser) serveDevtools(w http.ResponseWriter, r *http.Request) {
	if !isWebSocket(r) {
		if r.URL.Path == "/cdp" || r.URL.Path == "/cdp/" {
			b.serveDiscovery(w, r)
			return
		}
		if _, err := b.ready(r.Context()); err != nil {
			agentapi.WriteError(w, err)
			return
		}
		b.frontend.ServeHTTP(w, r)
		return
	}
	version, err := b.ready(r.Context())
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/cdp")
	if path == "" || path == "/" {
		ws, _ := version["webSocketDebuggerUrl"].(string)
		u, err := url.Parse(ws)
		if err != nil || u.Path == "" {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeUnavailable, "chromium reported no browser target"))
			return
		}
		path = u.Path
	}
	limit, err := maxMessage(r)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	filter := r.URL.Query().Get("filter") == agentapi.CDPFilterBrowserClose ||
		strings.EqualFold(r.Header.Get(agentapi.CDPFilterHeader), agentapi.CDPFilterBrowserClose)

	// Dial first, so a target that does not exist is a clean HTTP error rather than an accepted-then-closed socket.
	// Chromium refuses Host names other than IPs and localhost, and unknown Origins: send neither of the caller's.
	upstream, resp, err := websocket.Dial(r.Context(), "ws://127.0.0.1:"+strconv.Itoa(b.cfg.CDPPort)+path,
		&websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		// Chromium answers an unknown target id with "500 No such target id".
		if status == http.StatusNotFound || status == http.StatusBadRequest || status == http.StatusInternalServerError {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotFound, "no DevTools target at %s", path))
			return
		}
		e := agentapi.Errorf(agentapi.CodeUnavailable, "connecting to chromium's %s: %v", path, err)
		e.Retryable = true
		agentapi.WriteError(w, e)
		return
	}
	client, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The token authenticated this request; browsers' DevTools frontends come from other origins.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		upstream.CloseNow()
		return
	}
	client.SetReadLimit(limit)
	upstream.SetReadLimit(limit)
	var inspect func([]byte) ([]byte, error)
	if filter {
		inspect = filterBrowserEnding
	}
	relay(r.Context(), client, upstream, inspect)
}

func (b *Browser) frontendProxy() *httputil.ReverseProxy {
	base := b.cdpBase()
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(base)
			pr.SetURL(u)
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/cdp")
			pr.Out.URL.RawPath = ""
			pr.Out.Host = u.Host
			pr.Out.Header.Del(agentapi.TokenHeader)
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Origin")
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			e := agentapi.Errorf(agentapi.CodeUnavailable, "chromium: %v", err)
			e.Retryable = true
			agentapi.WriteError(w, e)
		},
	}
}

// relay copies messages both ways, message for message with their type, until either end closes; the other end
// then gets the same close code. Both ends are pinged so idle connections through proxies stay up and dead peers
// are noticed. inspect, when set, sees each client->upstream message (text or binary) first and may answer it
// instead; an error from it ends the relay with 1008 (policy violation).
func relay(ctx context.Context, client, upstream *websocket.Conn, inspect func([]byte) ([]byte, error)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- pump(ctx, client, upstream, client, inspect) }()
	go func() { errc <- pump(ctx, upstream, client, nil, nil) }()
	go func() { errc <- pingBoth(ctx, client, upstream) }()
	err := <-errc
	code, reason := closeCodeFor(err)
	_ = client.Close(code, reason)
	_ = upstream.Close(code, reason)
	cancel()
}

// pump copies src to dst. With inspect, every message is read whole and may be answered on replyTo instead.
// Binary messages are inspected too: Chromium reads a binary frame's payload as a command just like a text one.
func pump(ctx context.Context, src, dst, replyTo *websocket.Conn, inspect func([]byte) ([]byte, error)) error {
	for {
		typ, r, err := src.Reader(ctx)
		if err != nil {
			return err
		}
		if inspect != nil {
			msg, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			reply, err := inspect(msg)
			if err != nil {
				return err
			}
			if reply != nil {
				if err := replyTo.Write(ctx, websocket.MessageText, reply); err != nil {
					return err
				}
				continue
			}
			if err := dst.Write(ctx, typ, msg); err != nil {
				return err
			}
			continue
		}
		w, err := dst.Writer(ctx, typ)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
}

func pingBoth(ctx context.Context, conns ...*websocket.Conn) error {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		for _, c := range conns {
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("peer did not answer a ping: %w", err)
			}
		}
	}
}

// closeCodeFor maps why a relay ended to the close code both ends get: a peer's own close code is passed on, an
// oversized message is 1009, anything else 1011 (or 1001 when the agent is going away).
func closeCodeFor(err error) (websocket.StatusCode, string) {
	if code := websocket.CloseStatus(err); code != -1 {
		var ce websocket.CloseError
		reason := ""
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		switch code {
		case websocket.StatusNoStatusRcvd, websocket.StatusAbnormalClosure, websocket.StatusTLSHandshake:
			return websocket.StatusNormalClosure, ""
		}
		return code, reason
	}
	if errors.Is(err, websocket.ErrMessageTooBig) {
		return websocket.StatusMessageTooBig, "message too big"
	}
	var refused *filterError
	if errors.As(err, &refused) {
		return websocket.StatusPolicyViolation, truncate(refused.Error(), 100)
	}
	if errors.Is(err, context.Canceled) {
		return websocket.StatusGoingAway, ""
	}
	return websocket.StatusInternalError, truncate(err.Error(), 100)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// maxMessage reads X-Sandgate-WS-Max-Message; no header means no limit beyond memory.
func maxMessage(r *http.Request) (int64, error) { return agentapi.WSMaxMessage(r, -1) }

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || r.Method == http.MethodConnect
}
