// Package fastgpt is a drop-in for FastGPT's fastgpt-agent-sandbox-proxy: it checks browser tickets, resolves the
// sandbox through FastGPT's verifyTicket endpoint and relays the IDE agent's /fs and /terminal WebSockets and its
// preview HTTP, with the original's statuses, close codes, headers and timings.
package fastgpt

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Proxy serves the proxy's routes. It tracks its open relays so Close can end them with close frames.
type Proxy struct {
	cfg    Config
	app    *appClient
	cache  *expirable.LRU[string, *sandboxAddress]
	client *http.Client // to IDE agents' preview servers

	mu     sync.Mutex
	relays map[*relay]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New checks cfg (a secret under 32 bytes is refused, as the original refuses to start) and returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:    cfg,
		app:    newAppClient(&cfg),
		cache:  expirable.NewLRU[string, *sandboxAddress](previewCacheEntries, nil, cfg.AddressCacheTTL),
		relays: map[*relay]struct{}{},
	}
	p.client = newPreviewClient(cfg.timing.previewConnect)
	return p, nil
}

// Handles reports whether r is for one of the routes this Proxy serves; a Caddy handler passes the rest on.
func (p *Proxy) Handles(r *http.Request) bool {
	path := r.URL.Path
	switch {
	case path == "/health":
		return true
	case path == "/fs" || path == "/terminal":
		return p.cfg.Routes != RoutesPreview
	case strings.HasPrefix(path, "/preview/"):
		return p.cfg.Routes != RoutesWS
	}
	return false
}

// ServeHTTP serves /health, /fs, /terminal and /preview/...; any other path is 404 with an empty body.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.Handles(r) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	path := r.URL.Path
	switch {
	case path == "/health":
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK"))
	case path == "/fs":
		if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			p.serveWS(w, r, channelFS)
		}
	case path == "/terminal":
		if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			p.serveWS(w, r, channelTerminal)
		}
	default:
		if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			p.servePreview(w, r)
		}
	}
}

func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ","))
	w.WriteHeader(http.StatusMethodNotAllowed)
	return false
}

// writeText writes one of the fixed error bodies with the original's headers.
func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	setSecurityHeaders(h)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func setSecurityHeaders(h http.Header) {
	h.Set("Cache-Control", "private, no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

// track registers a relay; it returns false when the proxy is closing.
func (p *Proxy) track(rl *relay) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.relays[rl] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) untrack(rl *relay) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.relays[rl]; ok {
		delete(p.relays, rl)
		p.wg.Done()
	}
}

// Close ends every open relay with a 1001 close frame to both sides, as Caddy's reverse_proxy closes its hijacked
// WebSockets on Cleanup, and waits until they are gone or ctx ends. New connections are refused afterwards.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for rl := range p.relays {
		rl.shutdown()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.client.CloseIdleConnections()
	return nil
}

func (p *Proxy) closeWaitContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.cfg.timing.closeWait)
}
