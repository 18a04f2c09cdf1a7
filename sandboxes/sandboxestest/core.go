// Package sandboxestest is the test double of the lifecycle core for the unit tests above it (sandboxes/service
// and the dialects). NewManager is the real *sandboxes.Manager over Engine, an in-memory engine driver, and a bbolt
// store in the test's directory: what a new test uses. Core, an in-memory lifecycle with the Manager's own method
// signatures and knobs for what it answers (ids, clock, hold failures), serves the tests not yet moved to it.
// Integration tests use the real Manager on the real engine.
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
	// CreatedStatus and CreatedCaps are a created sandbox's status (default ready) and capabilities.
	CreatedStatus sandboxes.Status
	CreatedCaps   []string
	// HoldErr, when set, is what every Hold fails with; else Hold answers AgentAddr and AgentToken.
	HoldErr               error
	AgentAddr, AgentToken string
	// DeleteErr, when set, is what Delete fails with.
	DeleteErr error
	// Events is what Subscribe streams; its cancel closes it.
	Events chan sandboxes.Event
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
	// GC is what RunGC reports (the Manager's collection is tested on its own, in sandboxes and on the engine).
	GC sandboxes.GCReport
	// GCStatus is what GCState reports.
	GCStatus sandboxes.GCState

	mu       sync.Mutex
	gcRuns   int
	profiles []sandboxes.Profile
	boxes    map[string]*sandboxes.Sandbox
	ws       map[string]*sandboxes.Workspace
	holds    int
	calls    []string
	deleted  []string
	creates  []sandboxes.CreateRequest
	wsN      int
}

// New makes a Core serving profiles and holding the sandboxes given.
func New(profiles []sandboxes.Profile, boxes ...sandboxes.Sandbox) *Core {
	c := &Core{profiles: profiles, boxes: map[string]*sandboxes.Sandbox{}, ws: map[string]*sandboxes.Workspace{},
		CreatedStatus: sandboxes.StatusReady}
	for _, sb := range boxes {
		c.Put(sb)
	}
	return c
}

// Put stores (or replaces) a sandbox as it is.
func (c *Core) Put(sb sandboxes.Sandbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.boxes[sb.ID] = &sb
}

// PutWorkspace stores (or replaces) a workspace as it is.
func (c *Core) PutWorkspace(w sandboxes.Workspace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.putWorkspace(&w) // a test's own store failing shows in the test's next read
}

// Box is a copy of a sandbox as the core holds it; false when there is none.
func (c *Core) Box(id string) (sandboxes.Sandbox, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb, ok := c.boxes[id]
	if !ok {
		return sandboxes.Sandbox{}, false
	}
	return *sb, true
}

// Len is how many sandboxes the core holds.
func (c *Core) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.boxes)
}

// SetStatus moves a sandbox to st, as the Manager's own transitions would.
func (c *Core) SetStatus(id string, st sandboxes.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sb, ok := c.boxes[id]; ok {
		sb.Status = st
	}
}

// HasWorkspace says whether a workspace record exists.
func (c *Core) HasWorkspace(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, err := c.workspace(id)
	return err == nil && w != nil
}

// Holds is how many times Hold was called (a start the test may require never happened).
func (c *Core) Holds() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds
}

// Calls lists the state changes that reached the core ("pause <id>", "resume <id>", "patch <id>", "delete <id>").
func (c *Core) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// Creates lists the create requests that reached the core, in order (refused ones included).
func (c *Core) Creates() []sandboxes.CreateRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.creates)
}

// RunGC counts a collection asked for now and reports GC, as the Manager's RunGC does.
func (c *Core) RunGC(ctx context.Context) (sandboxes.GCReport, error) {
	if err := ctx.Err(); err != nil {
		return sandboxes.GCReport{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gcRuns++
	return c.GC, nil
}

// GCState reports GCStatus, as the Manager's GCState reports its collector.
func (c *Core) GCState() sandboxes.GCState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.GCStatus
}

// GCRuns counts the RunGC calls.
func (c *Core) GCRuns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gcRuns
}

// Deleted lists the sandboxes deleted, in order.
func (c *Core) Deleted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.deleted)
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
	c.creates = append(c.creates, req)
	id := "sb-" + req.Owner + "-new"
	if c.NewID != nil {
		id = c.NewID(len(c.creates), req)
	}
	caps := c.CreatedCaps
	if caps == nil {
		caps = prof.Capabilities
	}
	sb := sandboxes.Sandbox{ID: id, Owner: req.Owner, Profile: req.Profile, WorkspaceID: req.WorkspaceID,
		Status: c.CreatedStatus, Capabilities: slices.Clone(caps), Metadata: maps.Clone(req.Metadata),
		CreatedAt: time.Date(2026, 1, 1, 0, 0, len(c.creates), 0, time.UTC)}
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

// Delete fails with DeleteErr, or forgets the sandbox and the record of its managed workspace.
func (c *Core) Delete(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.DeleteErr != nil {
		return c.DeleteErr
	}
	c.calls = append(c.calls, "delete "+id)
	c.deleted = append(c.deleted, id)
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

// setStatus notes the change and moves the sandbox to st.
func (c *Core) setStatus(call, id string, st sandboxes.Status) (*sandboxes.Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call+" "+id)
	sb, ok := c.boxes[id]
	if !ok {
		return nil, notFound(id)
	}
	sb.Status = st
	return c.get(id)
}

// Pause freezes the sandbox: it reads paused.
func (c *Core) Pause(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	return c.setStatus("pause", id, sandboxes.StatusPaused)
}

// Resume thaws it: it reads ready.
func (c *Core) Resume(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	return c.setStatus("resume", id, sandboxes.StatusReady)
}

// PatchMetadata merges patch into the sandbox's metadata (nil deletes a key).
func (c *Core) PatchMetadata(_ context.Context, id string, patch map[string]*string) (*sandboxes.Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "patch "+id)
	sb, ok := c.boxes[id]
	if !ok {
		return nil, notFound(id)
	}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	for k, v := range patch {
		if v == nil {
			delete(sb.Metadata, k)
		} else {
			sb.Metadata[k] = *v
		}
	}
	return c.get(id)
}

// AccessKey is "key-<id>-<purpose>" while the sandbox exists.
func (c *Core) AccessKey(id, purpose string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.boxes[id]; !ok {
		return "", notFound(id)
	}
	return "key-" + id + "-" + purpose, nil
}

// Subscribe streams Events (without them, a stream that stays open and quiet); its cancel closes Events once.
func (c *Core) Subscribe(int) (<-chan sandboxes.Event, func()) {
	if c.Events == nil {
		return make(chan sandboxes.Event), func() {}
	}
	var once sync.Once
	return c.Events, func() { once.Do(func() { close(c.Events) }) }
}
