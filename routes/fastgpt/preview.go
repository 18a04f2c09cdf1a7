package fastgpt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/routes/egress"
)

const (
	previewPrefix           = "/preview/"
	headerAgentToken        = "X-Fastgpt-Agent-Token"
	headerPreviewMethod     = "X-Fastgpt-Preview-Method"
	bodyPreviewUnauthorized = "Unauthorized preview session"
	bodyPreviewForbidden    = "Preview session resolution failed"
	bodyPreviewBadRequest   = "Invalid preview request"
	bodyPreviewUnavailable  = "Sandbox preview is unavailable"
)

var (
	sandboxIDPattern = regexp.MustCompile(`^(app|skilledit)-[0-9a-f]{16}$`)
	sessionIDPattern = regexp.MustCompile(`^[a-z][A-Za-z0-9]{23}$`)

	// previewResponseHeaders are the only agent headers a preview response carries.
	previewResponseHeaders = []string{"Content-Type", "Content-Length", "Content-Range", "Accept-Ranges", "ETag"}
	// previewRequestHeaders are the only browser headers sent on to the agent.
	previewRequestHeaders = []string{"Range", "If-None-Match"}
)

var errPreviewRetryable = errors.New("agent preview answered a retryable status")

// agentAddrRules is the address policy (routes/egress) of dials to a sandbox's agent. The sandbox URL comes from the
// FastGPT app, and sandboxes live on loopback-published ports or private networks, so those are allowed; link-local
// (cloud metadata), unspecified, multicast and reserved ranges are not, whatever the URL or the DNS says.
var agentAddrRules = egress.AddrRules{Loopback: true, Private: func(netip.Addr) bool { return true }}

func newPreviewClient(connectTimeout time.Duration) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         agentAddrRules.DialContext(connectTimeout),
			TLSHandshakeTimeout: connectTimeout,
			IdleConnTimeout:     90 * time.Second,
			MaxIdleConnsPerHost: 16,
			// Bytes pass through as the agent sent them.
			DisableCompression: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// servePreview serves GET|HEAD /preview/{sandbox_id}/{session_id}/{*path} from the sandbox's preview server.
func (p *Proxy) servePreview(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.EscapedPath(), previewPrefix), "/", 3)
	if len(parts) < 3 {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	sandboxID, err1 := url.PathUnescape(parts[0])
	sessionID, err2 := url.PathUnescape(parts[1])
	if err1 != nil || err2 != nil || !sandboxIDPattern.MatchString(sandboxID) || !sessionIDPattern.MatchString(sessionID) {
		writeText(w, http.StatusUnauthorized, bodyPreviewUnauthorized)
		return
	}
	log := p.cfg.Logger.With("sandbox_id", sandboxID)
	credential := sandboxID + ":" + sessionID
	addr, err := p.resolvePreview(r.Context(), credential)
	if err != nil {
		log.Warn("fastgpt preview: session resolution failed", "error", err.Error())
		writeText(w, http.StatusForbidden, bodyPreviewForbidden)
		return
	}
	segments, ok := previewSegments(parts[2])
	if !ok {
		writeText(w, http.StatusBadRequest, bodyPreviewBadRequest)
		return
	}
	resp, err := p.fetchPreview(r, addr, segments)
	if err != nil {
		// A stale address (sandbox restarted elsewhere, password rotated): resolve again and retry once.
		log.Info("fastgpt preview: retrying with a fresh address", "error", err.Error())
		p.cache.Remove(cacheKey(credential))
		if addr, err = p.resolvePreview(r.Context(), credential); err == nil {
			resp, err = p.fetchPreview(r, addr, segments)
		}
		if err != nil {
			log.Warn("fastgpt preview: agent unavailable", "error", err.Error())
			writeText(w, http.StatusBadGateway, bodyPreviewUnavailable)
			return
		}
	}
	defer resp.Body.Close()
	h := w.Header()
	for _, name := range previewResponseHeaders {
		if v := resp.Header.Values(name); len(v) > 0 {
			h[name] = v
		}
	}
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	setSecurityHeaders(h)
	w.WriteHeader(resp.StatusCode)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		log.Debug("fastgpt preview: body copy ended early", "error", err.Error())
	}
}

// previewSegments decodes and checks the file path: not empty, relative, no backslash or NUL, and no empty, `.` or
// `..` segment.
func previewSegments(escaped string) ([]string, bool) {
	path, err := url.PathUnescape(escaped)
	if err != nil || path == "" || strings.HasPrefix(path, "/") || strings.ContainsAny(path, "\\\x00") {
		return nil, false
	}
	segments := strings.Split(path, "/")
	for _, s := range segments {
		if s == "" || s == "." || s == ".." {
			return nil, false
		}
	}
	return segments, true
}

func cacheKey(credential string) string {
	sum := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(sum[:])
}

// resolvePreview turns a preview credential into a sandbox address, from the cache when it is fresh.
func (p *Proxy) resolvePreview(ctx context.Context, credential string) (*sandboxAddress, error) {
	key := cacheKey(credential)
	if addr, ok := p.cache.Get(key); ok {
		return addr, nil
	}
	addr, err := p.app.resolve(ctx, headerPreviewSession, credential)
	if err != nil {
		return nil, err
	}
	if addr.AgentToken == "" || strings.TrimSpace(addr.SandboxURL) == "" {
		return nil, errors.New("verifyTicket returned no sandbox address")
	}
	p.cache.Add(key, addr)
	return addr, nil
}

// fetchPreview asks the agent's preview server for the file. A retryable outcome (connect error, 401, 502, 503,
// 504) is an error.
func (p *Proxy) fetchPreview(r *http.Request, addr *sandboxAddress, segments []string) (*http.Response, error) {
	target, err := agentPreviewURL(addr, p.cfg.RewriteHost, segments)
	if err != nil {
		return nil, fmt.Errorf("building preview URL: %w", err)
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("building preview request: %w", err)
	}
	req.Header.Set(headerAgentToken, addr.AgentToken)
	for _, name := range previewRequestHeaders {
		if v := r.Header.Values(name); len(v) > 0 {
			req.Header[name] = v
		}
	}
	if r.Method == http.MethodHead {
		req.Header.Set(headerPreviewMethod, http.MethodHead)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("preview request: %s", strings.ReplaceAll(err.Error(), addr.AgentToken, "REDACTED"))
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %d", errPreviewRetryable, resp.StatusCode)
	}
	return resp, nil
}
