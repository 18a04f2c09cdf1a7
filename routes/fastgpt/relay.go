package fastgpt

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Close reasons of the original, word for word: the browser's IDE shows some of them.
const (
	reasonAgentTokenMissing = "Agent token is missing"
	reasonEndpointMissing   = "Sandbox endpoint is missing"
	reasonEndpointInvalid   = "Invalid sandbox endpoint"
	reasonConnectFailed     = "Failed to connect sandbox agent"
	reasonHandshakeBuffer   = "Handshake buffer limit exceeded"
	reasonMessageTooLarge   = "Sandbox message too large"
	reasonConnectionLost    = "Sandbox agent connection lost"
	reasonAgentClosed       = "Sandbox agent closed"
	reasonClientClosed      = "Client connection closed"
	reasonKeepaliveRejected = "Sandbox keepalive rejected"
	reasonKeepaliveFailed   = "Sandbox keepalive failed"
	statusUnauthorizedBody  = "Unauthorized"
	statusForbiddenBody     = "Forbidden"
	statusShuttingDown      = websocket.StatusGoingAway
)

// serveWS authenticates a browser WebSocket, upgrades it and relays it to the sandbox's IDE agent.
func (p *Proxy) serveWS(w http.ResponseWriter, r *http.Request, channel string) {
	log := p.cfg.Logger.With("channel", channel, "remote", r.RemoteAddr)
	ticket := r.URL.Query().Get("ticket")
	if ticket == "" {
		log.Debug("fastgpt websocket refused: no ticket")
		writeText(w, http.StatusUnauthorized, statusUnauthorizedBody)
		return
	}
	claims, err := parseTicket([]byte(p.cfg.Secret), ticket)
	if err == nil {
		err = claims.authorize(channel)
	}
	if err != nil {
		log.Info("fastgpt websocket refused", "error", err.Error())
		writeText(w, http.StatusUnauthorized, statusUnauthorizedBody)
		return
	}
	log = log.With("chat_id", claims.ChatID, "source_id", claims.SourceID)
	addr, err := p.app.resolve(r.Context(), headerSandboxTicket, ticket)
	if err != nil {
		log.Warn("fastgpt websocket forbidden: verifyTicket failed", "error", err.Error())
		writeText(w, http.StatusForbidden, statusForbiddenBody)
		return
	}
	client, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The ticket is the authentication; the original checks no Origin either.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		log.Info("fastgpt websocket upgrade failed", "error", err.Error())
		return
	}
	client.SetReadLimit(addr.WSLimits.MaxMessageBytes)
	rl := &relay{p: p, claims: claims, channel: channel, client: client, limits: addr.WSLimits, log: log,
		stop: make(chan struct{})}
	if !p.track(rl) {
		_ = client.Close(statusShuttingDown, "")
		return
	}
	defer p.untrack(rl)
	rl.run(addr)
}

// relay is one browser WebSocket joined to one IDE agent WebSocket.
type relay struct {
	p        *Proxy
	claims   *Claims
	channel  string
	client   *websocket.Conn
	limits   wsLimits
	log      *slog.Logger
	stop     chan struct{}
	stopOnce sync.Once
}

func (rl *relay) shutdown() { rl.stopOnce.Do(func() { close(rl.stop) }) }

type wsMessage struct {
	typ  websocket.MessageType
	data []byte
}

type eventKind int

const (
	evClientGone   eventKind = iota // client read or write failed: upstream gets 1000
	evUpstreamRead                  // upstream read ended: close, too large or lost
	evUpstreamLost                  // upstream write or ping failed
	evKeepalive                     // a keepalive call finished
)

type event struct {
	kind eventKind
	err  error
}

func (rl *relay) run(addr *sandboxAddress) {
	t := rl.p.cfg.timing
	target, err := agentWSURL(addr, rl.p.cfg.RewriteHost, rl.channel, rl.claims.Permission)
	if err != nil {
		reason := reasonEndpointInvalid
		switch {
		case errors.Is(err, errAgentTokenMissing):
			reason = reasonAgentTokenMissing
		case errors.Is(err, errEndpointMissing):
			reason = reasonEndpointMissing
		}
		rl.log.Warn("fastgpt relay: bad sandbox address", "error", err.Error())
		rl.closeBoth(nil, websocket.StatusPolicyViolation, reason)
		return
	}
	rl.log = rl.log.With("upstream", redactURL(target))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	events := make(chan event, 4)
	emit := func(e event) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	}
	// browser -> agent: until the agent answers, frames go to connect's buffer; then this goroutine writes them
	// to the agent itself, with no further hop.
	clientMsgs := make(chan wsMessage)
	clientErr := make(chan error, 1)
	ready := make(chan *websocket.Conn, 1)
	go func() {
		var up *websocket.Conn
		for {
			typ, data, err := rl.client.Read(ctx)
			if err != nil {
				clientErr <- err
				return
			}
			m := wsMessage{typ, data}
			if up == nil {
				select {
				case clientMsgs <- m:
					continue
				case up = <-ready:
				case <-ctx.Done():
					return
				}
			}
			if err := writeMessage(ctx, up, m, rl.limits.MaxFrameBytes); err != nil {
				emit(event{evUpstreamLost, err})
				return
			}
		}
	}()

	upstream, early, ok := rl.connect(ctx, target, addr.AgentToken, clientMsgs, clientErr)
	if !ok {
		return
	}
	rl.log.Info("fastgpt relay open")
	for _, m := range early {
		if err := writeMessage(ctx, upstream, m, rl.limits.MaxFrameBytes); err != nil {
			rl.log.Warn("fastgpt relay: flushing early frames failed", "error", err.Error())
			rl.closeBoth(upstream, websocket.StatusInternalError, reasonConnectionLost)
			return
		}
	}
	ready <- upstream
	go func() { // agent -> browser
		for {
			typ, data, err := upstream.Read(ctx)
			if err != nil {
				emit(event{evUpstreamRead, err})
				return
			}
			if err := writeMessage(ctx, rl.client, wsMessage{typ, data}, rl.limits.MaxFrameBytes); err != nil {
				emit(event{evClientGone, err})
				return
			}
		}
	}()

	ping := time.NewTicker(t.pingInterval)
	defer ping.Stop()
	keepalive := time.NewTicker(t.keepaliveInterval)
	defer keepalive.Stop()
	keepaliveBusy, keepaliveFailures := false, 0
	for {
		var e event
		select {
		case err := <-clientErr:
			e = event{evClientGone, err}
		case e = <-events:
		case <-ping.C:
			go func() {
				pctx, pcancel := context.WithTimeout(ctx, t.pingInterval)
				defer pcancel()
				// A missing pong is not an error (the original only checks that the ping was sent); a failed send is.
				if err := upstream.Ping(pctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					emit(event{evUpstreamLost, err})
				}
			}()
			continue
		case <-keepalive.C:
			if !keepaliveBusy {
				keepaliveBusy = true
				go func() { emit(event{evKeepalive, rl.p.app.keepalive(ctx, rl.claims)}) }()
			}
			continue
		case <-rl.stop:
			rl.log.Info("fastgpt relay: closing for shutdown")
			rl.closeBoth(upstream, statusShuttingDown, "")
			return
		}
		switch e.kind {
		case evClientGone:
			code, reason := websocket.StatusNormalClosure, reasonClientClosed
			var ce websocket.CloseError
			if errors.As(e.err, &ce) && sendableCode(ce.Code) {
				code, reason = ce.Code, ce.Reason
			}
			rl.log.Info("fastgpt relay: client closed", "code", int(websocket.CloseStatus(e.err)))
			rl.finish(upstream, upstream, code, reason)
			return
		case evUpstreamRead:
			var ce websocket.CloseError
			switch {
			case errors.Is(e.err, websocket.ErrMessageTooBig):
				rl.log.Warn("fastgpt relay: agent message over the limit", "limit", rl.limits.MaxMessageBytes)
				rl.closeBoth(upstream, websocket.StatusMessageTooBig, reasonMessageTooLarge)
			case errors.As(e.err, &ce):
				code, reason := ce.Code, ce.Reason
				if !sendableCode(code) {
					code, reason = websocket.StatusNormalClosure, reasonAgentClosed
				}
				rl.log.Info("fastgpt relay: agent closed", "code", int(ce.Code))
				rl.finish(rl.client, upstream, code, reason)
			default:
				rl.log.Warn("fastgpt relay: agent connection lost", "error", e.err.Error())
				rl.closeBoth(upstream, websocket.StatusInternalError, reasonConnectionLost)
			}
			return
		case evUpstreamLost:
			rl.log.Warn("fastgpt relay: agent connection lost", "error", e.err.Error())
			rl.closeBoth(upstream, websocket.StatusInternalError, reasonConnectionLost)
			return
		case evKeepalive:
			keepaliveBusy = false
			var se *statusError
			switch {
			case e.err == nil:
				keepaliveFailures = 0
			case errors.As(e.err, &se) && se.clientError():
				rl.log.Warn("fastgpt relay: keepalive rejected", "error", e.err.Error())
				rl.closeBoth(upstream, websocket.StatusPolicyViolation, reasonKeepaliveRejected)
				return
			default:
				keepaliveFailures++
				rl.log.Warn("fastgpt relay: keepalive failed", "error", e.err.Error(), "consecutive", keepaliveFailures)
				if keepaliveFailures >= t.keepaliveFailures {
					rl.closeBoth(upstream, websocket.StatusInternalError, reasonKeepaliveFailed)
					return
				}
			}
		}
	}
}

// connect dials the agent with the original's retries while buffering the browser's first frames.
func (rl *relay) connect(ctx context.Context, target, token string, clientMsgs <-chan wsMessage, clientErr <-chan error) (*websocket.Conn, []wsMessage, bool) {
	t := rl.p.cfg.timing
	dialCtx, dialCancel := context.WithCancel(ctx)
	defer dialCancel()
	type dialResult struct {
		c   *websocket.Conn
		err error
	}
	dialed := make(chan dialResult, 1)
	go func() {
		c, err := rl.dial(dialCtx, target, token)
		dialed <- dialResult{c, err}
	}()
	abandon := func() {
		dialCancel()
		go func() {
			if r := <-dialed; r.c != nil {
				_ = r.c.CloseNow()
			}
		}()
	}
	var early []wsMessage
	for {
		select {
		case m := <-clientMsgs:
			if len(early) >= t.earlyFrames {
				abandon()
				rl.log.Warn("fastgpt relay: too many frames before the agent answered", "limit", t.earlyFrames)
				rl.closeBoth(nil, websocket.StatusPolicyViolation, reasonHandshakeBuffer)
				return nil, nil, false
			}
			early = append(early, m)
		case <-clientErr:
			abandon()
			_ = rl.client.CloseNow()
			return nil, nil, false
		case <-rl.stop:
			abandon()
			rl.closeBoth(nil, statusShuttingDown, "")
			return nil, nil, false
		case r := <-dialed:
			if r.err != nil {
				rl.log.Warn("fastgpt relay: agent unreachable", "attempts", t.connectAttempts, "error", r.err.Error())
				rl.closeBoth(nil, websocket.StatusInternalError, reasonConnectFailed)
				return nil, nil, false
			}
			return r.c, early, true
		}
	}
}

// agentWSClient dials agents' WebSockets through the address policy (agentAddrRules). It follows no redirect:
// the websocket library would follow one (rewriting ws: to http:) to wherever a replaced agent names.
var agentWSClient = &http.Client{Transport: &http.Transport{DialContext: agentAddrRules.DialContext(30 * time.Second)},
	CheckRedirect: agentapi.NoRedirect}

// dial tries the agent connectAttempts times, connectInterval apart: the agent may still be starting.
func (rl *relay) dial(ctx context.Context, target, token string) (*websocket.Conn, error) {
	t := rl.p.cfg.timing
	var last error
	for i := 0; i < t.connectAttempts; i++ {
		if i > 0 {
			select {
			case <-time.After(t.connectInterval):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		actx, cancel := context.WithTimeout(ctx, t.dialTimeout)
		c, resp, err := websocket.Dial(actx, target, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled,
			HTTPClient: agentWSClient})
		cancel()
		if resp != nil && resp.Body != nil && err != nil {
			_ = resp.Body.Close()
		}
		if err == nil {
			c.SetReadLimit(rl.limits.MaxMessageBytes)
			return c, nil
		}
		last = errors.New(strings.ReplaceAll(err.Error(), token, "REDACTED"))
		rl.log.Debug("fastgpt relay: dial attempt failed", "attempt", i+1, "error", last.Error())
	}
	return nil, last
}

// finish relays a close: the closing side's code and reason go to peer, and the other connection is closed too.
func (rl *relay) finish(peer, upstream *websocket.Conn, code websocket.StatusCode, reason string) {
	ctx, cancel := rl.p.closeWaitContext()
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []*websocket.Conn{rl.client, upstream} {
		wg.Add(1)
		go func(c *websocket.Conn) {
			defer wg.Done()
			if c == peer {
				closeWithin(ctx, c, code, reason)
			} else {
				_ = c.CloseNow()
			}
		}(c)
	}
	wg.Wait()
}

// closeBoth sends the same close frame to the browser and, when connected, the agent.
func (rl *relay) closeBoth(upstream *websocket.Conn, code websocket.StatusCode, reason string) {
	ctx, cancel := rl.p.closeWaitContext()
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range []*websocket.Conn{rl.client, upstream} {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func(c *websocket.Conn) {
			defer wg.Done()
			closeWithin(ctx, c, code, reason)
		}(c)
	}
	wg.Wait()
}

// closeWithin sends a close frame and waits for the peer's answer until ctx ends. A peer that never answers is
// then left to the relay's context cancellation, which drops the connection.
func closeWithin(ctx context.Context, c *websocket.Conn, code websocket.StatusCode, reason string) {
	done := make(chan struct{})
	go func() {
		_ = c.Close(code, reason)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// sendableCode reports whether a received close code may be put on the wire again (1005, 1006 and 1015 may not).
func sendableCode(code websocket.StatusCode) bool {
	switch {
	case code == websocket.StatusNoStatusRcvd, code == websocket.StatusAbnormalClosure, code == websocket.StatusTLSHandshake:
		return false
	case code >= 1000 && code <= 1014, code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// writeMessage writes one message, split into frames of at most maxFrame bytes.
func writeMessage(ctx context.Context, c *websocket.Conn, m wsMessage, maxFrame int64) error {
	if maxFrame <= 0 || int64(len(m.data)) <= maxFrame {
		return c.Write(ctx, m.typ, m.data)
	}
	w, err := c.Writer(ctx, m.typ)
	if err != nil {
		return err
	}
	for data := m.data; len(data) > 0; {
		n := int(min(maxFrame, int64(len(data))))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return w.Close()
}
