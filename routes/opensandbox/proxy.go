package opensandbox

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/tickets"
)

// The proxy: ANY and WebSocket /sandboxes/{id}/proxy/{port}[/path] (and under /v1). OpenSandbox leaves these paths
// open to anyone who knows the sandbox id; sandgate admits a request only with
//   - the sandbox's proxy key: in the id segment (/sandboxes/{id}.{key}/proxy/...), which is how the endpoints this
//     API hands out are spelt, so a client that keeps only the URL works; or in the OPEN-SANDBOX-PROXY-KEY header; or
//   - an API key (OPEN-SANDBOX-API-KEY) of the sandbox's owner, or an admin key.
// The proxy key is an HMAC of the sandbox id under the sandbox's own agent token (sandboxes.Manager.AccessKey):
// unguessable, one sandbox only, valid while the sandbox exists. Neither credential reaches the sandbox: both are
// removed before the request is forwarded, with every client X-Sandgate-* header.
//
// Port 44772 (execd's) goes to the agent's /execd/ API; any other port to that port inside the sandbox through the
// agent's /proxy/{port}/, as the app route does. Dot segments are refused: "/execd/../v1/exec" must never reach
// the agent's own API.

// ProxyKeyHeader carries the proxy key where the path does not.
const ProxyKeyHeader = "OPEN-SANDBOX-PROXY-KEY"

// ExecdPort is execd's port in OpenSandbox; the agent serves its API under /execd/.
const ExecdPort = 44772

const (
	proxyKeyPurpose   = "opensandbox-proxy"
	proxyKeySeparator = "."
)

// proxyPath is a parsed proxy request.
type proxyPath struct {
	ID   string
	Key  string // from the path, "" when absent
	Port int
	Rest string // escaped, "" or starting with "/"
}

var proxyPathPattern = regexp.MustCompile(`^(?:/v1)?/sandboxes/([^/]+)/proxy/([0-9]{1,5})(/.*)?$`)

// parseProxyPath reads an escaped path; ok is false when it is not a proxy path at all.
func parseProxyPath(escaped string) (proxyPath, bool) {
	m := proxyPathPattern.FindStringSubmatch(escaped)
	if m == nil {
		return proxyPath{}, false
	}
	pa := proxyPath{Rest: m[3]}
	pa.ID, pa.Key, _ = strings.Cut(m[1], proxyKeySeparator)
	pa.Port, _ = strconv.Atoi(m[2])
	return pa, true
}

// checkRest refuses what the agent would resolve outside the route: dot segments (also percent-encoded, and
// behind an encoded slash) and NUL bytes.
func checkRest(rest string) *Error {
	p, err := url.PathUnescape(rest)
	if err != nil {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, "the proxy path is not validly escaped")
	}
	if strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return errorf(http.StatusBadRequest, CodeInvalidRequest, "the proxy path holds a NUL byte or a backslash")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return errorf(http.StatusBadRequest, CodeInvalidRequest, "the proxy path must not hold . or .. segments")
		}
	}
	return nil
}

// admitProxy checks the request's credential for sandbox pa.ID. Every refusal for a sandbox that is missing,
// another owner's or named with a wrong key is the same 404.
func (h *Handler) admitProxy(ctx context.Context, r *http.Request, pa proxyPath) *Error {
	if !sandboxroute.ValidSandboxID(pa.ID) {
		return notFound(pa.ID)
	}
	key := pa.Key
	if key == "" {
		key = strings.TrimSpace(r.Header.Get(ProxyKeyHeader))
	}
	if key != "" {
		if !h.cfg.Service.AccessKeyValid(pa.ID, proxyKeyPurpose, key) {
			return notFound(pa.ID)
		}
		return nil
	}
	p, e := h.authenticate(r)
	if e != nil {
		return e
	}
	_, e = h.visible(ctx, p, pa.ID)
	return e
}

func (h *Handler) proxy(w http.ResponseWriter, r *http.Request, pa proxyPath, fwd Forwarder) {
	if e := h.admitProxy(r.Context(), r, pa); e != nil {
		writeError(w, e)
		return
	}
	if pa.Port < 1 || pa.Port > 65535 {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidPort, "port %d is not a port number", pa.Port))
		return
	}
	if e := checkRest(pa.Rest); e != nil {
		writeError(w, e)
		return
	}
	var agent sandboxroute.AgentRequest
	if pa.Port == ExecdPort {
		rest := pa.Rest
		if rest == "" {
			rest = "/"
		}
		agent = sandboxroute.AgentRequest{EscapedPath: "/execd" + rest, RawQuery: r.URL.RawQuery}
	} else {
		var err error
		agent, err = sandboxroute.AgentPath(sandboxroute.Address{SandboxID: pa.ID, Kind: tickets.KindApp, Rest: pa.Rest}, pa.Port, r.URL.RawQuery)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, CodeInvalidPort, "%v", err))
			return
		}
	}
	// The lease comes first, as in sandboxroute.Route.Prepare: the idle collector then never stops the container
	// this request is about to use.
	target, err := h.holdForProxy(r.Context(), pa.ID)
	if err != nil {
		writeError(w, toError(err))
		return
	}
	r.Header.Del(APIKeyHeader)
	r.Header.Del(ProxyKeyHeader)
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), sandboxroute.GatewayHeaderPrefix) {
			r.Header.Del(k)
		}
	}
	// Every sandbox's ports share this one origin, execd's included: sandbox code can replace the agent and answer
	// execd's paths with a page of its own. Whatever they serve runs under the sandbox CSP, as path-form app routes
	// do, so a page of one sandbox cannot script this origin or register a service worker on it; and it may not set
	// cookies or widen a worker's scope here (sandboxroute.GuardAnswer).
	shared := sandboxroute.Address{SandboxID: pa.ID, Kind: tickets.KindApp}
	sandboxroute.SetContentHeaders(w.Header(), shared, "")
	if err := agent.Apply(r); err != nil {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "%v", err))
		return
	}
	fwd.Forward(sandboxroute.GuardAnswer(w, shared), r, target)
}

// DirectForwarder proxies with net/http's reverse proxy, streaming (WebSocket upgrades included); the Caddy glue
// uses Caddy's reverse_proxy instead.
type DirectForwarder struct{}

// Forward sends r to the agent at t.
func (DirectForwarder) Forward(w http.ResponseWriter, r *http.Request, t sandboxes.Target) {
	base, client := agentapi.BaseURL(t.Addr, nil)
	u, err := url.Parse(base)
	if err != nil {
		writeError(w, errorf(http.StatusBadGateway, CodeProxyUnavailable, "the sandbox's agent address is unusable"))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.URL.Path, pr.Out.URL.RawPath = pr.In.URL.Path, pr.In.URL.RawPath
			pr.Out.Header.Set(sandboxroute.GatewayHeaderPrefix+"Token", t.Token)
		},
		// The guard Serve wraps w in filters at WriteHeader; httputil copies a 101's headers after hijacking
		// instead, so the answer is filtered here as well.
		ModifyResponse: func(res *http.Response) error {
			sandboxroute.StripAnswerHeaders(res.Header)
			return nil
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			writeError(w, errorf(http.StatusBadGateway, CodeProxyUnavailable, "the sandbox did not answer"))
		},
	}
	if client != nil && client.Transport != nil {
		rp.Transport = client.Transport
	}
	rp.ServeHTTP(w, r)
}

// holdForProxy leases the sandbox for the whole proxied request and starts it within StartTimeout. The caller
// was admitted already (admitProxy): by the sandbox's own key, or by a key of its owner.
func (h *Handler) holdForProxy(ctx context.Context, id string) (sandboxes.Target, error) {
	ss, err := h.cfg.Service.HoldGranted(ctx, id, h.cfg.StartTimeout)
	if err != nil {
		return sandboxes.Target{}, err
	}
	return ss.Target(), nil
}
