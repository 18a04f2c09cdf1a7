// Package portproxy serves /proxy/{port}/... (prefix stripped) and /absproxy/{port}/... (prefix kept): HTTP and
// WebSocket traffic to a service listening on 127.0.0.1:{port} inside the sandbox, flushed as it streams.
package portproxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Config tunes the proxy.
type Config struct {
	// Reserved ports are refused with port_not_allowed, each with the reason given (the agent's own port; the
	// browser's, which have routes of their own that rewrite and filter).
	Reserved map[int]string
	// Token is the agent token, removed from what goes upstream so a sandboxed app never sees it.
	Token  agentapi.TokenCheck
	Logger *slog.Logger
}

// Proxy is the port proxy.
type Proxy struct {
	cfg Config
	rp  *httputil.ReverseProxy
}

// New returns a proxy.
func New(cfg Config) *Proxy {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Proxy{cfg: cfg}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		FlushInterval: -1, // event streams and long polls pass through as they are written
		ErrorHandler:  p.upstreamError,
		ErrorLog:      slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return p
}

// Routes is what Register needs from the agent's server.
type Routes interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds the proxy's routes.
func (p *Proxy) Register(r Routes) {
	r.HandleFunc("/proxy/{port}", p.redirectSlash)
	r.HandleFunc("/absproxy/{port}", p.redirectSlash)
	r.HandleFunc("/proxy/{port}/", p.serve(true))
	r.HandleFunc("/absproxy/{port}/", p.serve(false))
}

// redirectSlash sends /proxy/8080 to /proxy/8080/ with a relative Location, so it works under any external prefix.
func (p *Proxy) redirectSlash(w http.ResponseWriter, r *http.Request) {
	if _, err := p.port(r); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	loc := r.PathValue("port") + "/"
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	// Set by hand: http.Redirect would make the location absolute, which is wrong behind the gateway's prefix.
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusPermanentRedirect)
}

type ctxKey struct{}

type target struct {
	port  int
	strip bool
}

func (p *Proxy) serve(strip bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		port, err := p.port(r)
		if err != nil {
			agentapi.WriteError(w, err)
			return
		}
		r = r.WithContext(contextWith(r.Context(), target{port: port, strip: strip}))
		p.rp.ServeHTTP(w, r)
	}
}

func (p *Proxy) port(r *http.Request) (int, error) {
	raw := r.PathValue("port")
	port, err := strconv.Atoi(raw)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != raw {
		return 0, agentapi.Errorf(agentapi.CodeInvalidRequest, "%q is not a port (1-65535)", raw)
	}
	if why, ok := p.cfg.Reserved[port]; ok {
		e := agentapi.Errorf(agentapi.CodePortNotAllowed, "port %d cannot be proxied: %s", port, why)
		e.HTTPStatus = agentapi.PortNotAllowedStatus
		return 0, e
	}
	return port, nil
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	t := targetFrom(pr.In.Context())
	route := "absproxy"
	if t.strip {
		route = "proxy"
	}
	prefix := fmt.Sprintf("/%s/%d", route, t.port)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = "127.0.0.1:" + strconv.Itoa(t.port)
	if t.strip {
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, prefix)
		if raw := pr.In.URL.RawPath; raw != "" {
			pr.Out.URL.RawPath = strings.TrimPrefix(raw, prefix)
		}
		// The app learns where it lives, so it can build links (X-Forwarded-Prefix as Spring, Grafana and
		// Jupyter read it). A gateway in front states the external prefix itself (empty in subdomain form), and
		// that is the whole truth: /proxy/{port} is our own path, which the gateway's path already stands for.
		if v, viaGateway := pr.In.Header["X-Forwarded-Prefix"]; viaGateway && len(v) > 0 {
			pr.Out.Header.Set("X-Forwarded-Prefix", strings.TrimSuffix(v[0], "/"))
		} else {
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
		}
	}
	// Keep the gateway's view of the original request; Rewrite drops inbound X-Forwarded-* by default.
	for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := pr.In.Header.Values(h); len(v) > 0 {
			pr.Out.Header[h] = v
		}
	}
	if pr.Out.Header.Get("X-Forwarded-Host") == "" {
		pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	}
	pr.Out.Host = pr.Out.URL.Host
	p.stripToken(pr.Out)
}

// stripToken removes the agent token from the upstream request wherever the caller may have put it.
func (p *Proxy) stripToken(out *http.Request) {
	out.Header.Del(agentapi.TokenHeader)
	if a := out.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") && p.cfg.Token.Match(strings.TrimSpace(a[7:])) {
		out.Header.Del("Authorization")
	}
	if q := out.URL.Query(); q.Has("access_token") && p.cfg.Token.Match(q.Get("access_token")) {
		q.Del("access_token")
		out.URL.RawQuery = q.Encode()
	}
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	t := targetFrom(r.Context())
	if errors.Is(err, syscall.ECONNREFUSED) || isDialError(err) {
		e := agentapi.Errorf(agentapi.CodeUpstreamUnavailable, "nothing is listening on port %d in the sandbox", t.port).With("port", t.port)
		e.HTTPStatus = agentapi.UpstreamUnavailableStatus
		e.Retryable = true
		agentapi.WriteError(w, e)
		return
	}
	if r.Context().Err() != nil {
		return // the client left; nobody to answer
	}
	p.cfg.Logger.Warn("port proxy", "port", t.port, "error", err)
	e := agentapi.Errorf(agentapi.CodeUpstreamUnavailable, "proxying to port %d: %v", t.port, err).With("port", t.port)
	e.HTTPStatus = agentapi.UpstreamUnavailableStatus
	agentapi.WriteError(w, e)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
