package service

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Config wires the operations to their collaborators.
type Config struct {
	Sandboxes Sandboxes
	Agent     Agent
	// Streamer serves streaming exec, processes and PTY; nil answers those with capability_not_supported.
	Streamer Streamer
	// Tickets issues browser tickets; nil answers IssueTicket with capability_not_supported.
	Tickets TicketIssuer
	// History records executions; nil records nothing.
	History HistoryStore
	// ManagedWorkspace is how the workspace the Manager makes for a new sandbox (a create without a cargo, a fork, a
	// create from a snapshot) is listed among the workspaces: Bay's managed cargo. nil lists none.
	ManagedWorkspace *sandboxes.WorkspaceSpec
	// Exports keeps exported paths; nil answers ExportFiles with capability_not_supported.
	Exports ExportStore
	// Skills keeps the skills lifecycle's records (skills.go); nil answers it with capability_not_supported.
	Skills sandboxes.SkillStore
	// MaxSkillRecords caps the skill records of each kind one owner keeps; 0 means DefaultMaxSkillRecords.
	MaxSkillRecords int
	// ExportLimits bound one owner's exports (zero fields: sandboxes' defaults).
	ExportLimits sandboxes.ExportLimits
	// Fetch GETs a public URL for ImportFile; nil answers URL imports with capability_not_supported.
	Fetch Fetcher
	// MaxUploadBytes caps one upload or import; 0 means 1 GiB.
	MaxUploadBytes int64
	Logger         *slog.Logger
	Now            func() time.Time
}

// Service runs the operations every dialect offers. Each one takes the caller's Principal and applies the same
// ownership, capability and ensure-running rules; a dialect only decodes, calls and encodes.
type Service struct {
	cfg Config
	// injections remembers the skills written into each sandbox (skills_inject.go).
	injections skillInjections
	// learnKick wakes the browser learning loop when a learn run is recorded (skills_learn.go).
	learnKick chan struct{}
}

// New builds the operations over cfg.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxSkillRecords <= 0 {
		cfg.MaxSkillRecords = DefaultMaxSkillRecords
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 1 << 30
	}
	return &Service{cfg: cfg, learnKick: make(chan struct{}, 1)}
}

// Tickets is the ticket issuer, nil when the gateway mints none.
func (s *Service) Tickets() TicketIssuer { return s.cfg.Tickets }

// Profiles lists the profiles a sandbox can be created from.
func (s *Service) Profiles() []sandboxes.Profile { return s.cfg.Sandboxes.Profiles() }

// Visible fetches a sandbox the caller may see; another owner's sandbox does not exist for it (Bay scopes queries).
func (s *Service) Visible(ctx context.Context, p Principal, id string) (sandboxes.Sandbox, error) {
	sb, err := deref(s.cfg.Sandboxes.Get(ctx, id))
	if err != nil {
		return sb, err
	}
	if !p.Sees(sb.Owner) {
		return sandboxes.Sandbox{}, Errorf(CodeNotFound, "Sandbox not found: %s", id)
	}
	return sb, nil
}

// Unexpired fetches a sandbox the caller may see and act on: an expired one answers sandbox_expired.
func (s *Service) Unexpired(ctx context.Context, p Principal, id string) (sandboxes.Sandbox, error) {
	sb, err := s.Visible(ctx, p, id)
	if err != nil {
		return sb, err
	}
	if sb.Status == sandboxes.StatusExpired {
		return sandboxes.Sandbox{}, Errorf(CodeSandboxExpired, "Sandbox has expired: %s", id)
	}
	return sb, nil
}

// Running resolves a sandbox the caller owns for a capability call: it must not be expired, its profile must grant
// the capability, and its compute is started within this request when idle (Bay's ensure_running).
func (s *Service) Running(ctx context.Context, p Principal, id, capability string) (sandboxes.Target, error) {
	sb, err := s.Unexpired(ctx, p, id)
	if err != nil {
		return sandboxes.Target{}, err
	}
	if capability != "" && !slices.Contains(sb.Capabilities, capability) {
		avail := sb.Capabilities
		if avail == nil {
			avail = []string{}
		}
		return sandboxes.Target{}, Errorf(CodeCapability, "Sandbox %s does not support capability %q", id, capability).
			With("capability", capability).With("available", avail)
	}
	t, err := s.cfg.Sandboxes.Hold(ctx, id)
	if err != nil {
		var e *sandboxes.Error
		if errors.As(err, &e) && e.Code == sandboxes.CodeNotReady {
			if e.Details == nil {
				e.Details = map[string]any{}
			}
			if _, ok := e.Details["sandbox_id"]; !ok {
				e.Details["sandbox_id"] = id
			}
			if _, ok := e.Details["retry_after_ms"]; !ok {
				e.Details["retry_after_ms"] = 1000
			}
		}
		return sandboxes.Target{}, err
	}
	return t, nil
}

// StopSandbox stops a sandbox's compute, keeping its workspace.
func (s *Service) StopSandbox(ctx context.Context, p Principal, id string) error {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return err
	}
	return s.cfg.Sandboxes.Stop(ctx, id)
}

// ListSandboxes lists one page of the sandboxes p may see and the cursor of the next page ("" at the end).
func (s *Service) ListSandboxes(ctx context.Context, p Principal, opts sandboxes.ListOptions) ([]sandboxes.Sandbox, string, error) {
	switch opts.Status {
	case sandboxes.StatusIdle:
		// What reads idle includes the sandboxes still starting: a client is never shown starting.
		opts.Statuses = []sandboxes.Status{sandboxes.StatusStarting}
	case sandboxes.StatusStarting:
		return []sandboxes.Sandbox{}, "", nil // a client never sees starting
	}
	opts.Owner = p.listOwner()
	list, next, err := s.cfg.Sandboxes.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	out := make([]sandboxes.Sandbox, 0, len(list))
	for _, sb := range list {
		out = append(out, *sb)
	}
	return out, next, nil
}

// Keepalive counts as activity on a sandbox p may see, so the idle collector leaves it running.
func (s *Service) Keepalive(ctx context.Context, p Principal, id string) error {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return err
	}
	return s.cfg.Sandboxes.Keepalive(ctx, id)
}

// ExtendTTL pushes back the expiry of a sandbox p owns; one without a TTL answers sandbox_ttl_infinite.
func (s *Service) ExtendTTL(ctx context.Context, p Principal, id string, by time.Duration) (sandboxes.Sandbox, error) {
	sb, err := s.Unexpired(ctx, p, id)
	if err != nil {
		return sandboxes.Sandbox{}, err
	}
	if sb.ExpiresAt == nil {
		return sandboxes.Sandbox{}, Errorf(CodeTTLInfinite, "Sandbox has no TTL to extend: %s", id)
	}
	return deref(s.cfg.Sandboxes.ExtendTTL(ctx, id, by))
}
