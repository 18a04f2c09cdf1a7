package sandboxroute

import (
	"context"
	"fmt"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/tickets"
)

// Starter is what a route needs from the lifecycle: a running sandbox and a lease that keeps it from being
// idle-stopped while a request or stream is open. The sandboxes.Manager implements it.
type Starter interface {
	// EnsureRunning returns the agent's target, starting an idle sandbox first. Errors are *sandboxes.Error.
	EnsureRunning(ctx context.Context, id string) (sandboxes.Target, error)
	// Acquire holds the sandbox busy until release is called.
	Acquire(id string) (release func(), err error)
}

// Resolver finds a running sandbox's agent from memory, with no I/O.
type Resolver interface {
	Resolve(id string) (sandboxes.Target, bool)
}

// Registry answers whether a sandbox exists (running or idle), from memory.
type Registry interface {
	Exists(id string) bool
}

// DefaultStartTimeout bounds how long a request waits for an idle sandbox to start.
const DefaultStartTimeout = 60 * time.Second

// Route sends admitted requests of one kind to their sandbox's agent.
type Route struct {
	Sandboxes Starter
	Kind      tickets.Kind
	// Port fixes the app port (`sandbox_proxy port N`); 0 takes it from the URL, then from the profile.
	Port int
	// StartTimeout bounds the wait for an idle sandbox; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
}

// Prepared is a request ready to be proxied. Release must be called when the request or stream ends.
type Prepared struct {
	Target  sandboxes.Target
	Agent   AgentRequest
	Release func()
}

// Prepare starts the sandbox if it is idle (bounded by StartTimeout), takes a lease on it and works out the agent
// request. Errors are the lifecycle's *sandboxes.Error (a request for what this route does not serve is not_found),
// or wrap one.
func (rt *Route) Prepare(ctx context.Context, addr Address, rawQuery string) (Prepared, error) {
	if addr.Kind != rt.Kind {
		return Prepared{}, sandboxes.Errorf(sandboxes.CodeNotFound, "this route proxies %s, the request is for %s", rt.Kind, addr.Kind)
	}
	timeout := rt.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	// The lease comes first: the idle collector then never stops the container this request is about to use
	// (sandboxes.Manager.Hold explains the order).
	release, err := rt.Sandboxes.Acquire(addr.SandboxID)
	if err != nil {
		return Prepared{}, fmt.Errorf("holding sandbox %s: %w", addr.SandboxID, err)
	}
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	target, err := rt.Sandboxes.EnsureRunning(startCtx, addr.SandboxID)
	cancel()
	if err != nil {
		release()
		return Prepared{}, fmt.Errorf("starting sandbox %s: %w", addr.SandboxID, err)
	}
	port := addr.Port
	if port == 0 {
		port = rt.Port
	}
	if port == 0 {
		port = target.AppPort
	}
	agent, err := AgentPath(addr, port, rawQuery)
	if err != nil {
		release()
		return Prepared{}, &sandboxes.Error{Code: sandboxes.CodeNotFound, Message: err.Error()}
	}
	return Prepared{Target: target, Agent: agent, Release: release}, nil
}

// NewRoute is a route as the gateway's configuration names it: a kind, and a fixed port only for app routes.
func NewRoute(s Starter, kind string, port int, startTimeout time.Duration) (*Route, error) {
	k, err := tickets.ParseKind(kind)
	if err != nil {
		return nil, err
	}
	if port < 0 || port > 65535 || (port != 0 && k != tickets.KindApp) {
		return nil, fmt.Errorf("port %d is not valid for kind %s", port, k)
	}
	return &Route{Sandboxes: s, Kind: k, Port: port, StartTimeout: startTimeout}, nil
}
