package e2b

import (
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

// The E2B edge, on the content origin: {port}-{id}.{domain}, or the routing headers E2b-Sandbox-Id and
// E2b-Sandbox-Port when Host is {domain} itself (E2B_SANDBOX_URL=https://{domain}). Unlike E2B's proxy, Host
// localhost or an address does not take the headers: on a gateway those are the API's own origin, whose cookies
// (the console's session) must never reach a sandbox. Only sandboxes made
// through this dialect are served; any other request is not the edge's (Serve answers false) and goes on to the
// content origin's own routes unchanged.
//
//   - 49983 (envd) needs the sandbox's X-Access-Token, except GET /health; GET and POST /files also take E2B's URL
//     signature. It goes to the agent at agentapi.E2BEnvdPrefix + path.
//   - 49999 (code interpreter) goes to agentapi.E2BCodePrefix + path.
//   - any other port goes to that port in the sandbox, without a ticket, as on E2B.
//
// Every port but 49983 needs the e2b-traffic-access-token header when the sandbox was created with
// network.allowPublicTraffic false. E2B's credentials never reach the sandbox: they are removed with every
// client X-Sandgate-* header, and the sandbox-wide envVars go to the agent in agentapi.E2BEnvHeader.

// Headers of E2B's edge.
const (
	AccessTokenHeader  = "X-Access-Token"
	TrafficTokenHeader = "E2b-Traffic-Access-Token"
	SandboxIDHeader    = "E2b-Sandbox-Id"
	SandboxPortHeader  = "E2b-Sandbox-Port"
)

// EdgeConfig wires the edge.
type EdgeConfig struct {
	Service *service.Service
	// Domains are the sandbox domains (hosts, no port): {port}-{id}.{domain} is routed, and {domain} itself takes
	// the routing headers.
	Domains []string
	Logger  *slog.Logger
	Now     func() time.Time
}

// Forwarder sends an admitted request, already pointed at the agent's path, to the sandbox's agent at t (with
// t.Token as the agent credential). The Caddy glue hands it to reverse_proxy with the sandbox upstream.
type Forwarder interface {
	Forward(w http.ResponseWriter, r *http.Request, t sandboxes.Target)
}

// Edge admits and forwards E2B's sandbox traffic.
type Edge struct {
	cfg EdgeConfig
}

// NewEdge builds the edge.
func NewEdge(cfg EdgeConfig) *Edge {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for i, d := range cfg.Domains {
		cfg.Domains[i] = strings.ToLower(strings.TrimSuffix(d, "."))
	}
	return &Edge{cfg: cfg}
}

// Target is the sandbox and port a request names.
type Target struct {
	ID   string
	Port int
}

// ParseTarget reads the sandbox and port of a request from its Host ({port}-{id}.{domain}) or, when Host is a
// domain itself, from the routing headers. ok is false when the request names none in
// E2B's form: an id with '-' is never E2B's (its proxy splits the label on '-').
func ParseTarget(host string, header http.Header, domains []string) (Target, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	headerRouted := false
	for _, d := range domains {
		if host == d {
			headerRouted = true
			break
		}
		label, ok := strings.CutSuffix(host, "."+d)
		if !ok || strings.Contains(label, ".") {
			continue
		}
		port, id, ok := strings.Cut(label, "-")
		if !ok {
			return Target{}, false
		}
		return checkTarget(port, id)
	}
	if !headerRouted {
		return Target{}, false
	}
	return checkTarget(header.Get(SandboxPortHeader), header.Get(SandboxIDHeader))
}

func checkTarget(port, id string) (Target, bool) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return Target{}, false
	}
	if id == "" || strings.Contains(id, "-") || !sandboxroute.ValidSandboxID(id) {
		return Target{}, false
	}
	return Target{ID: id, Port: n}, true
}

// Serve admits and forwards a request for an E2B sandbox and reports true, or reports false without answering
// when the request is not the edge's.
func (e *Edge) Serve(w http.ResponseWriter, r *http.Request, fwd Forwarder) bool {
	t, ok := ParseTarget(r.Host, r.Header, e.cfg.Domains)
	if !ok {
		return false
	}
	svc := e.cfg.Service
	sb, err := svc.Visible(r.Context(), service.Principal{Admin: true}, t.ID)
	if err != nil {
		if !strings.HasPrefix(t.ID, sandboxes.UnguessableIDPrefix) {
			return false // not an id of this dialect: the content origin's own routes answer
		}
		writeEdgeError(w, t.ID, toError(err))
		return true
	}
	st, ok := stateOf(sb)
	if !ok {
		return false
	}
	if sb.Status == sandboxes.StatusExpired {
		writeEdgeError(w, t.ID, notFound(t.ID))
		return true
	}
	if ae := e.admit(r, t, st); ae != nil {
		writeError(w, ae)
		return true
	}
	if !st.AutoResume && pausedByTenant(sb) {
		// E2B resumes a paused sandbox on traffic only with autoResume; without it only connect does.
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusConflict, map[string]any{"sandboxId": t.ID, "code": http.StatusConflict,
			"message": "sandbox " + t.ID + " is paused; resume it with connect (it was created without autoResume)"})
		return true
	}
	rest := r.URL.EscapedPath()
	if ae := checkRest(rest); ae != nil {
		writeError(w, ae)
		return true
	}
	var agent sandboxroute.AgentRequest
	query := sandboxroute.RemoveQueryParam(sandboxroute.RemoveQueryParam(r.URL.RawQuery, "signature"), "signature_expiration")
	switch t.Port {
	case agentapi.E2BEnvdPort:
		agent = sandboxroute.AgentRequest{EscapedPath: agentapi.E2BEnvdPrefix + rest, RawQuery: query}
	case agentapi.E2BCodePort:
		agent = sandboxroute.AgentRequest{EscapedPath: agentapi.E2BCodePrefix + rest, RawQuery: query}
	default:
		agent, err = sandboxroute.AgentPath(sandboxroute.Address{SandboxID: t.ID, Kind: tickets.KindApp, Rest: rest}, t.Port, r.URL.RawQuery)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, "%v", err))
			return true
		}
	}
	// The lease is held for the whole request (as sandboxroute.Route.Prepare does): the idle collector never stops
	// the container this request is using, and a paused or stopped sandbox is resumed or started first.
	target, err := svc.Running(r.Context(), service.Principal{Owner: sb.Owner}, t.ID, "")
	if err != nil {
		writeEdgeError(w, t.ID, toError(err))
		return true
	}
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), sandboxroute.GatewayHeaderPrefix) {
			r.Header.Del(k)
		}
	}
	r.Header.Del(AccessTokenHeader)
	r.Header.Del(TrafficTokenHeader)
	if t.Port == agentapi.E2BEnvdPort || t.Port == agentapi.E2BCodePort {
		r.Header.Set(agentapi.E2BEnvHeader, st.envHeader())
	}
	if err := agent.Apply(r); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%v", err))
		return true
	}
	fwd.Forward(sandboxroute.GuardAnswer(w, sandboxroute.Address{SandboxID: t.ID, Kind: tickets.KindApp, Subdomain: true}), r, target)
	return true
}

// admit checks E2B's credentials for the port. Tokens are compared in constant time with the keys derived for
// this sandbox.
func (e *Edge) admit(r *http.Request, t Target, st state) *Error {
	key := func(purpose string) string {
		k, err := e.cfg.Service.SandboxAccessKey(t.ID, purpose)
		if err != nil {
			return "" // matches no token: a sandbox going away refuses
		}
		return k
	}
	same := func(got, want string) bool {
		return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	}
	if t.Port == agentapi.E2BEnvdPort {
		if r.Method == http.MethodGet && r.URL.Path == "/health" {
			return nil
		}
		want := key(purposeEnvd)
		if got := r.Header.Get(AccessTokenHeader); got != "" {
			if same(got, want) {
				return nil
			}
		} else if r.URL.Path == "/files" && want != "" && SignedFileRequest(r.Method, r.URL.RawQuery, want, e.cfg.Now()) {
			return nil
		}
		return errorf(http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
	}
	if st.Private && !same(r.Header.Get(TrafficTokenHeader), key(purposeTraffic)) {
		return errorf(http.StatusForbidden, "this sandbox's ports need its e2b-traffic-access-token header (network.allowPublicTraffic is false)")
	}
	return nil
}

// checkRest refuses what the agent would resolve outside the route: dot segments (also percent-encoded), NUL bytes
// and backslashes.
func checkRest(rest string) *Error {
	p, err := url.PathUnescape(rest)
	if err != nil {
		return errorf(http.StatusBadRequest, "the path is not validly escaped")
	}
	if strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return errorf(http.StatusBadRequest, "the path holds a NUL byte or a backslash")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return errorf(http.StatusBadRequest, "the path must not hold . or .. segments")
		}
	}
	return nil
}

// writeEdgeError answers as E2B's proxy does when a sandbox cannot be reached: a missing or gone sandbox is 502
// with {sandboxId, message, code:502} (the SDK reads 502 as "the sandbox was killed"); others keep their status.
func writeEdgeError(w http.ResponseWriter, id string, e *Error) {
	if e.Status == http.StatusNotFound {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "message": "sandbox " + id + " is not running or does not exist", "code": http.StatusBadGateway})
		return
	}
	writeError(w, e)
}
