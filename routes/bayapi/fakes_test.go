package bayapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// fakeManager is an in-memory lifecycle with the Manager's observable behaviour: created sandboxes become ready by
// themselves, EnsureRunning starts idle ones, typed errors.
type fakeManager struct {
	mu       sync.Mutex
	profiles []sandboxes.Profile
	boxes    map[string]*sandboxes.Sandbox
	order    []string
	ensured  int
	notReady bool
	// startupFailure makes every start fail as the agent's start-up customisation does, with this message.
	startupFailure string
	now            func() time.Time
	// store keeps the workspace records, as the Manager's one store does.
	store *sandboxes.BoltStore
}

func newFakeManager(now func() time.Time) *fakeManager {
	return &fakeManager{
		now:   now,
		boxes: map[string]*sandboxes.Sandbox{},
		profiles: []sandboxes.Profile{
			{ID: "python-default", Image: "sandgate/sandbox:base", Capabilities: []string{"filesystem", "shell", "python"},
				Resources: sandboxes.Resources{CPUs: 1, Memory: "1g"}, IdleTimeout: sandboxes.Duration(30 * time.Minute)},
			{ID: "browser-python", Image: "sandgate/sandbox:browser", Capabilities: []string{"filesystem", "shell", "python", "browser"}},
		},
	}
}

func (m *fakeManager) Create(_ context.Context, req sandboxes.CreateRequest) (*sandboxes.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var prof *sandboxes.Profile
	for i := range m.profiles {
		if m.profiles[i].ID == req.Profile {
			prof = &m.profiles[i]
		}
	}
	if prof == nil {
		return nil, sandboxes.Errorf(sandboxes.CodeUnknownProfile, "no profile %q", req.Profile)
	}
	id := service.NewID("sandbox-")
	ws := req.WorkspaceID
	if ws == "" {
		ws = "ws-" + strings.TrimPrefix(id, "sandbox-")
		if spec := req.RecordWorkspace; spec != nil {
			now := m.now().UTC()
			if err := m.store.PutCargo(&sandboxes.Workspace{ID: ws, Owner: req.Owner, Managed: true, ManagedBySandboxID: &id,
				Backend: spec.Backend, SizeLimitMB: spec.SizeLimitMB, CreatedAt: now, LastAccessedAt: now}); err != nil {
				return nil, err
			}
		}
	}
	sb := &sandboxes.Sandbox{ID: id, Profile: prof.ID, Owner: req.Owner, Status: sandboxes.StatusStarting,
		Capabilities: prof.Capabilities, WorkspaceID: ws, CreatedAt: m.now()}
	if req.TTL > 0 {
		exp := m.now().Add(req.TTL)
		sb.ExpiresAt = &exp
	}
	m.boxes[id] = sb
	m.order = append(m.order, id)
	out := *sb
	return &out, nil
}

func (m *fakeManager) CreateWorkspace(_ context.Context, spec sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error) {
	now := m.now().UTC()
	w := &sandboxes.Workspace{ID: service.NewID("ws-"), Owner: spec.Owner, Backend: spec.Backend, SizeLimitMB: spec.SizeLimitMB,
		CreatedAt: now, LastAccessedAt: now}
	return w, m.store.PutCargo(w)
}

func (m *fakeManager) Workspace(_ context.Context, id string) (*sandboxes.Workspace, error) {
	w, err := m.store.Cargo(id)
	if err == nil && w == nil {
		err = sandboxes.Errorf(sandboxes.CodeNotFound, "workspace %s not found", id)
	}
	return w, err
}

func (m *fakeManager) Workspaces(_ context.Context, owner string) ([]*sandboxes.Workspace, error) {
	all, err := m.store.Cargos()
	var out []*sandboxes.Workspace
	for _, w := range all {
		if owner == "" || w.Owner == owner {
			out = append(out, w)
		}
	}
	return out, err
}

// DeleteWorkspace refuses while a sandbox that has not expired mounts the workspace, as the Manager does.
func (m *fakeManager) DeleteWorkspace(_ context.Context, id string) error {
	m.mu.Lock()
	var users []string
	for _, sb := range m.boxes {
		if sb.WorkspaceID == id && sb.Status != sandboxes.StatusExpired {
			users = append(users, sb.ID)
		}
	}
	m.mu.Unlock()
	if len(users) > 0 {
		return &sandboxes.Error{Code: sandboxes.CodeWorkspaceInUse, Message: "in use",
			Details: map[string]any{"active_sandbox_ids": users, "workspace_id": id}}
	}
	return m.store.DeleteCargo(id)
}

// Get reports a starting sandbox as ready on the next read: it warms up by itself.
func (m *fakeManager) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.boxes[id]
	if !ok {
		return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "sandbox %s not found", id)
	}
	out := *sb
	if sb.Status == sandboxes.StatusStarting {
		sb.Status = sandboxes.StatusReady
	}
	if sb.ExpiresAt != nil && m.now().After(*sb.ExpiresAt) {
		sb.Status = sandboxes.StatusExpired
		out.Status = sandboxes.StatusExpired
	}
	return &out, nil
}

func (m *fakeManager) List(_ context.Context, o sandboxes.ListOptions) ([]*sandboxes.Sandbox, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := slices.Clone(m.order)
	sort.Strings(ids)
	var out []*sandboxes.Sandbox
	for _, id := range ids {
		sb := m.boxes[id]
		if (o.Owner != "" && sb.Owner != o.Owner) || (o.Status != "" && sb.Status != o.Status) || (o.Cursor != "" && id <= o.Cursor) {
			continue
		}
		if o.Limit > 0 && len(out) == o.Limit {
			return out, out[len(out)-1].ID, nil
		}
		c := *sb
		out = append(out, &c)
	}
	return out, "", nil
}

func (m *fakeManager) Hold(_ context.Context, id string) (sandboxes.Target, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.boxes[id]
	if !ok {
		return sandboxes.Target{}, sandboxes.Errorf(sandboxes.CodeNotFound, "sandbox %s not found", id)
	}
	if m.notReady {
		return sandboxes.Target{}, sandboxes.Errorf(sandboxes.CodeNotReady, "sandbox %s is starting", id)
	}
	if m.startupFailure != "" {
		sb.Status = sandboxes.StatusFailed
		sb.LastError = sandboxes.CodeStartupFailed + ": sandbox start-up failed: " + m.startupFailure
		return sandboxes.Target{}, &sandboxes.Error{Code: sandboxes.CodeStartupFailed,
			Message: "sandbox " + id + " could not be started: " + sb.LastError, Details: map[string]any{"last_error": sb.LastError}}
	}
	m.ensured++
	sb.Status = sandboxes.StatusReady
	idle := m.now().Add(30 * time.Minute)
	sb.IdleExpiresAt = &idle
	return sandboxes.Target{SandboxID: id, Addr: "agent:7777", Token: "t"}, nil
}

func (m *fakeManager) Stop(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sb, ok := m.boxes[id]; ok {
		sb.Status = sandboxes.StatusIdle
		sb.IdleExpiresAt = nil
		return nil
	}
	return sandboxes.Errorf(sandboxes.CodeNotFound, "sandbox %s not found", id)
}

func (m *fakeManager) Keepalive(_ context.Context, id string) error {
	if _, err := m.Get(context.Background(), id); err != nil {
		return err
	}
	return nil
}

func (m *fakeManager) ExtendTTL(_ context.Context, id string, by time.Duration) (*sandboxes.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb := m.boxes[id]
	base := *sb.ExpiresAt
	if m.now().After(base) {
		base = m.now()
	}
	exp := base.Add(by)
	sb.ExpiresAt = &exp
	out := *sb
	return &out, nil
}

// Delete drops the record of the sandbox's managed workspace with it, as the Manager does however a sandbox goes.
func (m *fakeManager) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sb := m.boxes[id]; sb != nil {
		if w, err := m.store.Cargo(sb.WorkspaceID); err == nil && w != nil && w.Managed && w.ManagedBySandboxID != nil && *w.ManagedBySandboxID == id {
			if err := m.store.DeleteCargo(w.ID); err != nil {
				return err
			}
		}
	}
	delete(m.boxes, id)
	m.order = slices.DeleteFunc(m.order, func(x string) bool { return x == id })
	return nil
}

func (m *fakeManager) Profiles() []sandboxes.Profile { return m.profiles }

// fakeAgent keeps a workspace in memory and runs a few shell commands.
type fakeAgent struct {
	mu       sync.Mutex
	files    map[string][]byte
	lastExec service.ExecRequest
	pyCount  int
	browser  []service.BrowserRequest
}

func newFakeAgent() *fakeAgent { return &fakeAgent{files: map[string][]byte{}} }

func (a *fakeAgent) Exec(_ context.Context, _ sandboxes.Target, req service.ExecRequest) (service.ExecResult, error) {
	a.mu.Lock()
	a.lastExec = req
	a.mu.Unlock()
	switch {
	case req.Command == "true":
		return service.ExecResult{}, nil
	case strings.HasPrefix(req.Command, "echo "):
		return service.ExecResult{Stdout: strings.TrimPrefix(req.Command, "echo ") + "\n"}, nil
	case req.Command == "sleep 999":
		return service.ExecResult{ExitCode: -1, TimedOut: true}, nil
	default:
		return service.ExecResult{ExitCode: 127, Stderr: "sh: " + req.Command + ": not found\n"}, nil
	}
}

func (a *fakeAgent) Python(_ context.Context, _ sandboxes.Target, req service.PythonRequest) (service.PythonResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pyCount++
	if strings.Contains(req.Code, "raise") {
		return service.PythonResult{Error: "Traceback: ValueError", ExecutionCount: a.pyCount}, nil
	}
	return service.PythonResult{Stdout: "hi\n", Result: "42", Images: []string{"iVBORw0KGgo="}, ExecutionCount: a.pyCount}, nil
}

func (a *fakeAgent) ReadFile(_ context.Context, _ sandboxes.Target, p string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.files[p]
	if !ok {
		return nil, agentapi.Errorf(agentapi.CodeFileNotFound, "no such file: %s", p)
	}
	return b, nil
}

func (a *fakeAgent) WriteFile(_ context.Context, _ sandboxes.Target, p string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[p] = b
	return nil
}

func (a *fakeAgent) ListDir(_ context.Context, _ sandboxes.Target, p string) ([]service.DirEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []service.DirEntry
	for name, b := range a.files {
		if p == "." || strings.HasPrefix(name, p+"/") {
			out = append(out, service.DirEntry{Name: name[strings.LastIndex(name, "/")+1:], Path: name, IsFile: true, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (a *fakeAgent) Remove(_ context.Context, _ sandboxes.Target, p string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.files[p]; !ok {
		return agentapi.Errorf(agentapi.CodeFileNotFound, "no such file: %s", p)
	}
	delete(a.files, p)
	return nil
}

func (a *fakeAgent) Upload(_ context.Context, _ sandboxes.Target, p string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[p] = b
	return int64(len(b)), nil
}

func (a *fakeAgent) Download(_ context.Context, _ sandboxes.Target, p, rng string) (*service.Download, error) {
	a.mu.Lock()
	b, ok := a.files[p]
	a.mu.Unlock()
	if !ok {
		return nil, agentapi.Errorf(agentapi.CodeFileNotFound, "no such file: %s", p)
	}
	h := http.Header{}
	if rng != "" {
		var start, end int
		if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &start, &end); err != nil || end >= len(b) {
			return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "bad range")
		}
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(b)))
		return &service.Download{Body: io.NopCloser(bytes.NewReader(b[start : end+1])), Status: http.StatusPartialContent, Header: h}, nil
	}
	h.Set("Content-Length", fmt.Sprint(len(b)))
	return &service.Download{Body: io.NopCloser(bytes.NewReader(b)), Status: http.StatusOK, Header: h}, nil
}

func (a *fakeAgent) Browser(_ context.Context, _ sandboxes.Target, req service.BrowserRequest) (service.BrowserResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.browser = append(a.browser, req)
	switch req.Action {
	case "navigate":
		return service.BrowserResult{Value: req.URL}, nil
	case "title":
		return service.BrowserResult{Value: "Example Domain"}, nil
	case "screenshot":
		return service.BrowserResult{PNG: []byte("\x89PNG")}, nil
	case "evaluate":
		return service.BrowserResult{Value: "2"}, nil
	}
	return service.BrowserResult{Value: "text"}, nil
}
