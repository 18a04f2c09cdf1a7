// Package envd serves E2B's in-sandbox daemon ("envd") for E2B's SDKs: the Connect RPC services process.Process and
// filesystem.Filesystem (generated into envdpb/ from spec/, our .proto definition of E2B's envd wire contract,
// checked against the npm e2b SDK's own descriptors by TestWireContractMatchesSDK) and the REST routes /health,
// /files and /envs. The agent mounts it under agentapi.E2BEnvdPrefix behind its token; the gateway's E2B edge checks
// E2B's X-Access-Token and forwards, adding the sandbox-wide environment in agentapi.E2BEnvHeader.
//
// It is a translator onto the agent's own pieces: processes run in a process.Manager, paths are confined by a
// workspace.Root. E2B's code assumes the user "user" with home /home/user; that home is the workspace (paths.go),
// so what E2B code writes there persists and snapshots like everything else in the workspace.
package envd

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem/filesystemconnect"
	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process/processconnect"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

const (
	// DefaultUser is the user name E2B's SDKs and templates assume; it is the sandbox's own (only) user.
	DefaultUser = "user"
	// HomeDir is the home of DefaultUser as E2B code names it; it maps onto the workspace root.
	HomeDir = "/home/user"
	// rootUser is refused: sandboxes have no root.
	rootUser = "root"

	// maxEnvHeader bounds the sandbox environment carried in agentapi.E2BEnvHeader.
	maxEnvHeader = 256 << 10
	// defaultKeepalive is the keepalive interval of streams whose request names none (envd's default).
	defaultKeepalive = 90 * time.Second
	// minKeepalive bounds how often a client may ask for keepalives.
	minKeepalive = time.Second
	// maxMessageBytes bounds one Connect request message (process configs, inputs, paths).
	maxMessageBytes = 16 << 20
)

// Deps are what envd uses.
type Deps struct {
	// Root confines every path; its directory is E2B's /home/user.
	Root *workspace.Root
	// Procs runs the processes. Its rings should be large enough for the output E2B clients stream (they cannot
	// resume from an offset, so output that leaves a ring before it is sent is lost to them).
	Procs *process.Manager
	// MaxFileBytes caps one uploaded file.
	MaxFileBytes int64
	// HomeAlias is a path that names the workspace for processes (HomeDir when the image links it there); "" when
	// processes see the workspace only under its real path.
	HomeAlias string
	// SandboxUser is the account processes run as; besides DefaultUser, E2B callers may name it.
	SandboxUser string
	Logger      *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Service is envd: Handler serves it with paths relative to the prefix.
type Service struct {
	d        Deps
	paths    paths
	procs    *procTable
	watchers *watcherTable
}

// New returns envd over d. Close stops its watchers.
func New(d Deps) *Service {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.MaxFileBytes <= 0 {
		d.MaxFileBytes = agentapi.DefaultMaxFileBytes
	}
	s := &Service{d: d, paths: paths{root: d.Root}, procs: newProcTable(), watchers: newWatcherTable()}
	return s
}

// Close ends the watchers (processes belong to the manager, which the agent closes).
func (s *Service) Close() { s.watchers.closeAll() }

// Handler routes envd: the two Connect services and the REST routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(maxMessageBytes)}
	path, h := processconnect.NewProcessHandler(&processService{s: s}, opts...)
	mux.Handle(path, h)
	path, h = filesystemconnect.NewFilesystemHandler(&fsService{s: s}, opts...)
	mux.Handle(path, h)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /envs", s.getEnvs)
	mux.HandleFunc("GET /files", s.getFile)
	mux.HandleFunc("POST /files", s.postFiles)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			writeREST(w, http.StatusNotFound, fmt.Sprintf("no envd route %s %s", r.Method, r.URL.Path))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// sandboxEnv reads the sandbox-wide environment the gateway forwards.
func sandboxEnv(h http.Header) (map[string]string, error) {
	v := h.Get(agentapi.E2BEnvHeader)
	if v == "" {
		return map[string]string{}, nil
	}
	if len(v) > maxEnvHeader {
		return nil, fmt.Errorf("the sandbox environment header is over %d bytes", maxEnvHeader)
	}
	env := map[string]string{}
	if err := json.Unmarshal([]byte(v), &env); err != nil {
		return nil, fmt.Errorf("the sandbox environment header is not a JSON object of strings: %w", err)
	}
	return env, nil
}

// userError says why a named user is refused ("" names the default user): nil for the sandbox's own user.
type userError struct {
	root bool
	name string
}

func (e *userError) Error() string {
	if e.root {
		return "user root: commands and files run as the sandbox user (\"user\"); sandgate sandboxes have no root"
	}
	return fmt.Sprintf("user %q does not exist in this sandbox (it has one user, \"user\")", e.name)
}

// checkUser accepts the default user, E2B's "user" and the sandbox account's own name.
func (s *Service) checkUser(name string) error {
	switch name {
	case "", DefaultUser:
		return nil
	case rootUser:
		return &userError{root: true}
	}
	if s.d.SandboxUser != "" && name == s.d.SandboxUser {
		return nil
	}
	return &userError{name: name}
}

// rpcUser is the user a Connect call names: Authorization: Basic base64("<user>:").
func rpcUser(h http.Header) (string, error) {
	a := h.Get("Authorization")
	if a == "" {
		return "", nil
	}
	scheme, cred, ok := strings.Cut(a, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", nil // not a user (a bearer token is the agent's)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", fmt.Errorf("the Authorization header's basic credentials are not base64: %w", err)
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name, nil
}

// authorize checks the user of a Connect call.
func (s *Service) authorize(h http.Header) error {
	name, err := rpcUser(h)
	if err != nil {
		return connect.NewError(connect.CodeUnauthenticated, err)
	}
	if err := s.checkUser(name); err != nil {
		if ue := (*userError)(nil); asUserError(err, &ue) && ue.root {
			return connect.NewError(connect.CodePermissionDenied, err)
		}
		return connect.NewError(connect.CodeUnauthenticated, err)
	}
	return nil
}

func asUserError(err error, target **userError) bool {
	ue, ok := err.(*userError)
	if ok {
		*target = ue
	}
	return ok
}

// keepaliveInterval is the stream keepalive the client asked for (Keepalive-Ping-Interval, seconds).
func keepaliveInterval(h http.Header) time.Duration {
	v := h.Get("Keepalive-Ping-Interval")
	if v == "" {
		return defaultKeepalive
	}
	var secs int
	if _, err := fmt.Sscanf(v, "%d", &secs); err != nil || secs <= 0 {
		return defaultKeepalive
	}
	d := time.Duration(secs) * time.Second
	return min(max(d, minKeepalive), defaultKeepalive)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
