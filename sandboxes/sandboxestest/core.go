// Package sandboxestest is the test double of the lifecycle core for the unit tests above it (sandboxes/service
// and the dialects). NewManager is the real *sandboxes.Manager over Engine, an in-memory engine driver, and a bbolt
// store in the test's directory: what a test uses. Core, an in-memory lifecycle with the 13 methods of
// service.Sandboxes and knobs for what it answers (ids, clock, hold failures), serves routes/bayapi's unit tests
// alone until they move to NewManager. Integration tests use the real Manager on the real engine.
package sandboxestest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// Core is an in-memory lifecycle: sandboxes and workspaces in maps, the Manager's typed errors, and knobs for what a
// test makes the Manager answer. Its zero value is not usable: make one with New.
type Core struct {
	// NewID names the n-th created sandbox (from 1); nil: "sb-<owner>-new". NewWorkspaceID names a created
	// workspace; nil: "ws-<owner>-<n>".
	NewID          func(n int, req sandboxes.CreateRequest) string
	NewWorkspaceID func() string
	// CreatedStatus is a created sandbox's status (default ready).
	CreatedStatus sandboxes.Status
	// HoldErr, when set, is what every Hold fails with; else Hold answers AgentAddr and AgentToken.
	HoldErr               error
	AgentAddr, AgentToken string
	// Now is the core's clock (expiry, idle deadlines); nil is time.Now.
	Now func() time.Time
	// ReadyOnRead makes a starting sandbox ready by itself: a read after the one that saw it starting finds it
	// ready, as a warm-up that needs no start (Bay's readiness polling).
	ReadyOnRead bool
	// StartupFailure, when set, makes every start fail as the agent's start-up customisation does, with this
	// message: the sandbox reads failed with it as its last error.
	StartupFailure string
	// Store, when set, keeps the workspace records, as the Manager keeps them in its one store (so a full disk
	// under it refuses a create); nil keeps them in memory.
	Store WorkspaceStore

	mu       sync.Mutex
	profiles []sandboxes.Profile
	boxes    map[string]*sandboxes.Sandbox
	ws       map[string]*sandboxes.Workspace
	holds    int
	creates  int
	wsN      int
}

// New makes an empty Core serving profiles.
func New(profiles []sandboxes.Profile) *Core {
	return &Core{profiles: profiles, boxes: map[string]*sandboxes.Sandbox{}, ws: map[string]*sandboxes.Workspace{},
		CreatedStatus: sandboxes.StatusReady}
}

// Holds is how many times Hold was called (a start the test may require never happened).
func (c *Core) Holds() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds
}

// WorkspaceStore keeps workspace records (*sandboxes.BoltStore).
type WorkspaceStore interface {
	PutCargo(w *sandboxes.Workspace) error
	Cargo(id string) (*sandboxes.Workspace, error)
	Cargos() ([]*sandboxes.Workspace, error)
	DeleteCargo(id string) error
}

func (c *Core) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// putWorkspace records w; the caller holds c.mu.
func (c *Core) putWorkspace(w *sandboxes.Workspace) error {
	if c.Store != nil {
		return c.Store.PutCargo(w)
	}
	cp := *w
	c.ws[w.ID] = &cp
	return nil
}

// workspace is a copy of workspace id, nil when there is none; the caller holds c.mu.
func (c *Core) workspace(id string) (*sandboxes.Workspace, error) {
	if c.Store != nil {
		return c.Store.Cargo(id)
	}
	w, ok := c.ws[id]
	if !ok {
		return nil, nil
	}
	cp := *w
	return &cp, nil
}

// dropWorkspace forgets workspace id; the caller holds c.mu.
func (c *Core) dropWorkspace(id string) error {
	if c.Store != nil {
		return c.Store.DeleteCargo(id)
	}
	delete(c.ws, id)
	return nil
}

func notFound(id string) error {
	return sandboxes.Errorf(sandboxes.CodeNotFound, "sandbox %s not found", id)
}

// get is a copy of sandbox id; the caller holds c.mu.
func (c *Core) get(id string) (*sandboxes.Sandbox, error) {
	sb, ok := c.boxes[id]
	if !ok {
		return nil, notFound(id)
	}
	if sb.ExpiresAt != nil && c.now().After(*sb.ExpiresAt) {
		sb.Status = sandboxes.StatusExpired
	}
	cp := *sb
	cp.Metadata = maps.Clone(sb.Metadata)
	return &cp, nil
}

// read is get for a caller's read: with ReadyOnRead, a starting sandbox is ready from the next read on.
func (c *Core) read(id string) (*sandboxes.Sandbox, error) {
	sb, err := c.get(id)
	if err == nil && c.ReadyOnRead && sb.Status == sandboxes.StatusStarting {
		c.boxes[id].Status = sandboxes.StatusReady
	}
	return sb, err
}

// Create makes the Manager's own checks of a caller's metadata, image and limits (pure functions of the profile)
// and stores a sandbox of the request's owner and profile, created a second after the previous one; without a
// workspace of the caller's, its own is recorded as the request asks (RecordWorkspace), as the Manager does.
func (c *Core) Create(_ context.Context, req sandboxes.CreateRequest) (*sandboxes.Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := sandboxes.ValidateMetadata(req.Metadata); err != nil {
		return nil, err
	}
	var prof sandboxes.Profile
	known := false
	for _, p := range c.profiles {
		if p.ID == req.Profile {
			prof, known = p, true
		}
	}
	if !known && req.Profile != "" {
		return nil, sandboxes.Errorf(sandboxes.CodeUnknownProfile, "no profile %q", req.Profile)
	}
	if req.Image != nil {
		derived, err := prof.WithImage(*req.Image)
		if err != nil {
			return nil, err
		}
		prof = derived
	}
	if req.Resources != (sandboxes.Resources{}) {
		if _, err := prof.WithResources(req.Resources); err != nil {
			return nil, err
		}
	}
	c.creates++
	id := "sb-" + req.Owner + "-new"
	if c.NewID != nil {
		id = c.NewID(c.creates, req)
	}
	sb := sandboxes.Sandbox{ID: id, Owner: req.Owner, Profile: req.Profile, WorkspaceID: req.WorkspaceID,
		Status: c.CreatedStatus, Capabilities: slices.Clone(prof.Capabilities), Metadata: maps.Clone(req.Metadata),
		CreatedAt: time.Date(2026, 1, 1, 0, 0, c.creates, 0, time.UTC)}
	if c.Now != nil {
		sb.CreatedAt = c.Now()
	}
	if req.TTL > 0 {
		exp := c.now().Add(req.TTL)
		sb.ExpiresAt = &exp
	}
	if sb.WorkspaceID == "" {
		sb.WorkspaceID = "ws-" + strings.TrimPrefix(sb.ID, "sandbox-")
		if spec := req.RecordWorkspace; spec != nil {
			sid, now := sb.ID, c.now().UTC()
			if err := c.putWorkspace(&sandboxes.Workspace{ID: sb.WorkspaceID, Owner: sb.Owner, Managed: true,
				ManagedBySandboxID: &sid, Backend: spec.Backend, SizeLimitMB: spec.SizeLimitMB, CreatedAt: now, LastAccessedAt: now}); err != nil {
				return nil, err
			}
		}
	}
	c.boxes[id] = &sb
	return c.get(id)
}

// Get describes a sandbox.
func (c *Core) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read(id)
}

// List answers every sandbox of opts.Owner ("": everyone's) whose metadata holds opts.Metadata, in id order, in
// one page.
func (c *Core) List(_ context.Context, opts sandboxes.ListOptions) ([]*sandboxes.Sandbox, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sandboxes.Sandbox
	for _, id := range slices.Sorted(maps.Keys(c.boxes)) {
		sb, _ := c.get(id)
		match := (opts.Owner == "" || sb.Owner == opts.Owner) && (opts.Cursor == "" || id > opts.Cursor) &&
			(opts.Status == "" || sb.Status == opts.Status || slices.Contains(opts.Statuses, sb.Status))
		for k, v := range opts.Metadata {
			match = match && sb.Metadata[k] == v
		}
		if !match {
			continue
		}
		if opts.Limit > 0 && len(out) == opts.Limit {
			return out, out[len(out)-1].ID, nil
		}
		out = append(out, sb)
	}
	return out, "", nil
}

// Hold counts the start and answers HoldErr, the start-up failure, or the agent at AgentAddr of a sandbox now
// ready.
func (c *Core) Hold(_ context.Context, id string) (sandboxes.Target, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start(id)
}

// start counts a start and answers HoldErr, the start-up failure, or a ready sandbox's agent; the caller holds
// c.mu.
func (c *Core) start(id string) (sandboxes.Target, error) {
	c.holds++
	if c.HoldErr != nil {
		return sandboxes.Target{}, c.HoldErr
	}
	if sb, ok := c.boxes[id]; ok {
		if c.StartupFailure != "" {
			sb.Status = sandboxes.StatusFailed
			sb.LastError = sandboxes.CodeStartupFailed + ": sandbox start-up failed: " + c.StartupFailure
			return sandboxes.Target{}, &sandboxes.Error{Code: sandboxes.CodeStartupFailed,
				Message: "sandbox " + id + " could not be started: " + sb.LastError, Details: map[string]any{"last_error": sb.LastError}}
		}
		sb.Status = sandboxes.StatusReady
		idle := c.now().Add(30 * time.Minute)
		sb.IdleExpiresAt = &idle
	}
	return c.target(id), nil
}

func (c *Core) target(id string) sandboxes.Target {
	tok := c.AgentToken
	if tok == "" {
		tok = "agent-token-" + id
	}
	return sandboxes.Target{SandboxID: id, Addr: c.AgentAddr, Token: tok}
}

// Stop makes the sandbox idle.
func (c *Core) Stop(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb, ok := c.boxes[id]
	if !ok {
		return notFound(id)
	}
	sb.Status, sb.IdleExpiresAt = sandboxes.StatusIdle, nil
	return nil
}

// Keepalive fails only for a sandbox that is not there.
func (c *Core) Keepalive(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.get(id)
	return err
}

// ExtendTTL pushes back the expiry of a sandbox that has one.
func (c *Core) ExtendTTL(_ context.Context, id string, by time.Duration) (*sandboxes.Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb, ok := c.boxes[id]
	if !ok {
		return nil, notFound(id)
	}
	if sb.ExpiresAt != nil {
		base := *sb.ExpiresAt
		if now := c.now(); now.After(base) {
			base = now
		}
		exp := base.Add(by)
		sb.ExpiresAt = &exp
	}
	return c.get(id)
}

// Delete forgets the sandbox and the record of its managed workspace.
func (c *Core) Delete(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sb := c.boxes[id]; sb != nil {
		if w, err := c.workspace(sb.WorkspaceID); err == nil && w != nil && w.Managed && w.ManagedBySandboxID != nil && *w.ManagedBySandboxID == id {
			if err := c.dropWorkspace(w.ID); err != nil {
				return err
			}
		}
	}
	delete(c.boxes, id)
	return nil
}

// Profiles lists the profiles New was given.
func (c *Core) Profiles() []sandboxes.Profile { return c.profiles }

// CreateWorkspace records a workspace of spec's owner (named by NewWorkspaceID, or after the clock).
func (c *Core) CreateWorkspace(_ context.Context, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wsN++
	id := fmt.Sprintf("ws-%s-%d", spec.Owner, c.wsN)
	if c.NewWorkspaceID != nil {
		id = c.NewWorkspaceID()
	}
	now := c.now().UTC()
	w := &sandboxes.Workspace{ID: id, Owner: spec.Owner, Backend: spec.Backend, SizeLimitMB: spec.SizeLimitMB,
		CreatedAt: now, LastAccessedAt: now}
	if err := c.putWorkspace(w); err != nil {
		return nil, err
	}
	return w, nil
}

// Workspace describes a workspace; a missing one is the Manager's not_found.
func (c *Core) Workspace(_ context.Context, id string) (*sandboxes.Workspace, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, err := c.workspace(id)
	if err == nil && w == nil {
		err = sandboxes.Errorf(sandboxes.CodeNotFound, "workspace %s not found", id)
	}
	return w, err
}

// Workspaces lists owner's workspaces ("": everyone's) in id order.
func (c *Core) Workspaces(_ context.Context, owner string) ([]*sandboxes.Workspace, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []*sandboxes.Workspace
	if c.Store != nil {
		var err error
		if all, err = c.Store.Cargos(); err != nil {
			return nil, err
		}
	} else {
		for _, w := range c.ws {
			cp := *w
			all = append(all, &cp)
		}
	}
	var out []*sandboxes.Workspace
	for _, w := range all {
		if owner == "" || w.Owner == owner {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b *sandboxes.Workspace) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteWorkspace refuses while a sandbox that has not expired mounts the workspace (workspace_in_use), as the
// Manager does.
func (c *Core) DeleteWorkspace(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var users []string
	for bid := range c.boxes {
		if sb, _ := c.get(bid); sb.WorkspaceID == id && sb.Status != sandboxes.StatusExpired {
			users = append(users, sb.ID)
		}
	}
	if len(users) > 0 {
		slices.Sort(users)
		return &sandboxes.Error{Code: sandboxes.CodeWorkspaceInUse, Message: "in use",
			Details: map[string]any{"active_sandbox_ids": users, "workspace_id": id}}
	}
	return c.dropWorkspace(id)
}
