package service

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// fakeSandboxes is an in-memory Manager for the ownership rules; Hold counts the starts it was asked for. Like the
// Manager, it lists a new sandbox's own workspace when asked (CreateRequest.RecordWorkspace) and drops that record
// when the sandbox goes.
type fakeSandboxes struct {
	mu    sync.Mutex
	sbs   map[string]sandboxes.Sandbox
	ws    map[string]*sandboxes.Workspace
	holds int
}

// Only attaching reads workspaces here: the Manager's workspace tests cover the rest.
func (f *fakeSandboxes) CreateWorkspace(context.Context, sandboxes.WorkspaceSpec) (*sandboxes.Workspace, error) {
	return nil, errors.New("no workspace creation in this fake")
}
func (f *fakeSandboxes) Workspace(_ context.Context, id string) (*sandboxes.Workspace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.ws[id]; ok {
		return w, nil
	}
	return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "no workspace %s", id)
}
func (f *fakeSandboxes) Workspaces(context.Context, string) ([]*sandboxes.Workspace, error) {
	return nil, errors.New("no workspace listing in this fake")
}
func (f *fakeSandboxes) DeleteWorkspace(context.Context, string) error {
	return errors.New("no workspace deletion in this fake")
}

func (f *fakeSandboxes) Create(_ context.Context, req sandboxes.CreateRequest) (*sandboxes.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := sandboxes.Sandbox{ID: "sb-" + req.Owner + "-new", Owner: req.Owner, Profile: req.Profile, WorkspaceID: req.WorkspaceID,
		Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem}}
	if sb.WorkspaceID == "" {
		sb.WorkspaceID = "ws-" + sb.ID
		if req.RecordWorkspace != nil {
			sid := sb.ID
			f.ws[sb.WorkspaceID] = &sandboxes.Workspace{ID: sb.WorkspaceID, Owner: sb.Owner, Managed: true, ManagedBySandboxID: &sid,
				Backend: req.RecordWorkspace.Backend, SizeLimitMB: req.RecordWorkspace.SizeLimitMB}
		}
	}
	f.sbs[sb.ID] = sb
	return &sb, nil
}

func (f *fakeSandboxes) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sbs[id]
	if !ok {
		return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "no sandbox %s", id)
	}
	return &sb, nil
}

func (f *fakeSandboxes) List(_ context.Context, o sandboxes.ListOptions) ([]*sandboxes.Sandbox, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sandboxes.Sandbox
	for _, sb := range f.sbs {
		if o.Owner == "" || sb.Owner == o.Owner {
			out = append(out, &sb)
		}
	}
	return out, "", nil
}

func (f *fakeSandboxes) Hold(_ context.Context, id string) (sandboxes.Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holds++
	return sandboxes.Target{SandboxID: id}, nil
}

func (f *fakeSandboxes) Stop(context.Context, string) error      { return nil }
func (f *fakeSandboxes) Keepalive(context.Context, string) error { return nil }
func (f *fakeSandboxes) ExtendTTL(_ context.Context, id string, _ time.Duration) (*sandboxes.Sandbox, error) {
	return f.Get(context.Background(), id)
}

func (f *fakeSandboxes) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.ws[f.sbs[id].WorkspaceID]; w != nil && w.ManagedBySandboxID != nil && *w.ManagedBySandboxID == id {
		delete(f.ws, w.ID)
	}
	delete(f.sbs, id)
	return nil
}

func (f *fakeSandboxes) Profiles() []sandboxes.Profile {
	return []sandboxes.Profile{{ID: DefaultProfile}}
}

// fakeAgent serves files from memory; it must never be reached by a refused call.
type fakeAgent struct {
	Agent
	files map[string]string // sandbox id/path -> content
}

func (a *fakeAgent) ReadFile(_ context.Context, t sandboxes.Target, p string) ([]byte, error) {
	return []byte(a.files[t.SandboxID+"/"+p]), nil
}

func (a *fakeAgent) Download(_ context.Context, t sandboxes.Target, p, _ string) (*Download, error) {
	return &Download{Body: io.NopCloser(strings.NewReader(a.files[t.SandboxID+"/"+p])), Status: 200}, nil
}

func (a *fakeAgent) Upload(_ context.Context, t sandboxes.Target, p string, body io.Reader) (int64, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return 0, err
	}
	a.files[t.SandboxID+"/"+p] = string(b)
	return int64(len(b)), nil
}

type fakeExports map[string]sandboxes.Export

func (e fakeExports) Exports(id string) ([]sandboxes.Export, error) {
	var out []sandboxes.Export
	for _, x := range e {
		if x.SandboxID == id {
			out = append(out, x)
		}
	}
	return out, nil
}

func (e fakeExports) PutExports(es []sandboxes.Export, _ sandboxes.ExportLimits) error {
	for _, x := range es {
		e[x.SandboxID+"/"+x.Path] = x
	}
	return nil
}

func (e fakeExports) Export(id, p string) (*sandboxes.Export, error) {
	if x, ok := e[id+"/"+p]; ok {
		return &x, nil
	}
	return nil, nil
}

func newTestService() (*Service, *fakeSandboxes, *fakeAgent) {
	sbs := &fakeSandboxes{sbs: map[string]sandboxes.Sandbox{
		"sb-alice": {ID: "sb-alice", Owner: "alice", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem}},
		"sb-alice2": {ID: "sb-alice2", Owner: "alice", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem},
			WorkspaceID: "ws-alice2"},
		"sb-bob":     {ID: "sb-bob", Owner: "bob", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem}},
		"sb-old":     {ID: "sb-old", Owner: "alice", Status: sandboxes.StatusExpired, Capabilities: []string{sandboxes.CapFilesystem}},
		"sb-nofiles": {ID: "sb-nofiles", Owner: "alice", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapShell}},
	}, ws: map[string]*sandboxes.Workspace{"ws-bob": {ID: "ws-bob", Owner: "bob"}}}
	agent := &fakeAgent{files: map[string]string{"sb-bob/secret.txt": "bob's", "sb-alice/notes.txt": "alice's"}}
	svc := New(Config{Sandboxes: sbs, Agent: agent, ManagedWorkspace: &sandboxes.WorkspaceSpec{Backend: "docker_volume", SizeLimitMB: 1024}, Exports: fakeExports{},
		Fetch: func(context.Context, *url.URL) (io.ReadCloser, error) {
			return nil, Errorf(CodeForbidden, "no network in this test")
		}})
	return svc, sbs, agent
}

// TestOwnership performs the attacks of one tenant on another's sandboxes: each is answered as if the sandbox did
// not exist (not_found), the other's sandbox is never started, and nothing of it is read, written or deleted.
func TestOwnership(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	tests := []struct {
		name string
		call func(*Service) error
		code string
	}{
		{"read another's file", func(s *Service) error { _, err := s.ReadFile(ctx, alice, "sb-bob", "secret.txt"); return err }, CodeNotFound},
		{"write another's file", func(s *Service) error {
			return s.WriteFile(ctx, alice, "sb-bob", "x", strings.NewReader("pwned"))
		}, CodeNotFound},
		{"upload into another's sandbox", func(s *Service) error {
			_, err := s.Upload(ctx, alice, "sb-bob", "x", strings.NewReader("pwned"))
			return err
		}, CodeNotFound},
		{"stop another's sandbox", func(s *Service) error { return s.StopSandbox(ctx, alice, "sb-bob") }, CodeNotFound},
		{"export another's file", func(s *Service) error {
			_, err := s.ExportFiles(ctx, alice, "sb-bob", []string{"secret.txt"})
			return err
		}, CodeNotFound},
		{"import from another's sandbox", func(s *Service) error {
			_, err := s.ImportFile(ctx, alice, "sb-alice", ImportParams{FromSandbox: "sb-bob", Path: "secret.txt"})
			return err
		}, CodeNotFound},
		{"import an unexported file of one's own", func(s *Service) error {
			_, err := s.ImportFile(ctx, alice, "sb-alice2", ImportParams{FromSandbox: "sb-alice", Path: "notes.txt"})
			return err
		}, CodeForbidden},
		{"attach another's cargo", func(s *Service) error {
			id := "ws-bob"
			_, err := s.CreateSandbox(ctx, alice, CreateParams{CargoID: &id})
			return err
		}, CodeNotFound},
		{"climb out of the workspace", func(s *Service) error { _, err := s.ReadFile(ctx, alice, "sb-alice", "../../etc/passwd"); return err }, CodeInvalidPath},
		{"use an expired sandbox", func(s *Service) error { _, err := s.ReadFile(ctx, alice, "sb-old", "a"); return err }, CodeSandboxExpired},
		{"use a capability the profile lacks", func(s *Service) error { _, err := s.ReadFile(ctx, alice, "sb-nofiles", "a"); return err }, CodeCapability},
		{"ticket for another's sandbox", func(s *Service) error {
			_, err := New(Config{Sandboxes: s.cfg.Sandboxes, Tickets: TicketMinter{}}).IssueTicket(ctx, alice, "sb-bob", "vnc", true, time.Minute)
			return err
		}, CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, sbs, agent := newTestService()
			err := tc.call(svc)
			if got := AsError(err).Code; got != tc.code {
				t.Fatalf("%v: code %s, want %s", err, got, tc.code)
			}
			if tc.code != CodeCapability && tc.code != CodeInvalidPath && sbs.holds != 0 {
				t.Errorf("a refused call started %d sandboxes", sbs.holds)
			}
			if agent.files["sb-bob/x"] != "" || agent.files["sb-bob/secret.txt"] != "bob's" {
				t.Errorf("bob's workspace changed: %v", agent.files)
			}
		})
	}
}

// TestDeleteIsIdempotentAndScoped: deleting another's sandbox succeeds as if it were gone, and leaves it be.
func TestDeleteIsIdempotentAndScoped(t *testing.T) {
	ctx := context.Background()
	svc, sbs, _ := newTestService()
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "alice"}, "sb-bob"); err != nil {
		t.Fatalf("delete of another's sandbox: %v", err)
	}
	if _, err := sbs.Get(ctx, "sb-bob"); err != nil {
		t.Fatalf("bob's sandbox was deleted by alice: %v", err)
	}
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "bob"}, "sb-bob"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "bob"}, "sb-bob"); err != nil {
		t.Errorf("a second delete: %v", err)
	}
	admin := Principal{Owner: "ops", Admin: true}
	if err := svc.DeleteSandbox(ctx, admin, "sb-alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := sbs.Get(ctx, "sb-alice"); err == nil {
		t.Errorf("an admin's delete left the sandbox")
	}
}

// TestTransferBetweenOwnSandboxes: an exported file of one's own sandbox is imported into another, within the cap.
func TestTransferBetweenOwnSandboxes(t *testing.T) {
	ctx := context.Background()
	svc, _, agent := newTestService()
	alice := Principal{Owner: "alice"}
	if _, err := svc.ExportFiles(ctx, alice, "sb-alice", []string{"./notes.txt"}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.ImportFile(ctx, alice, "sb-alice2", ImportParams{FromSandbox: "sb-alice", Path: "notes.txt", Destination: "in/copy.txt"})
	if err != nil || res.Size != int64(len("alice's")) || agent.files["sb-alice2/in/copy.txt"] != "alice's" || res.Source != "sandbox:sb-alice/notes.txt" {
		t.Fatalf("import: %+v %v", res, err)
	}
	small := New(Config{Sandboxes: svc.cfg.Sandboxes, Agent: agent, MaxUploadBytes: 3})
	if _, err := small.Upload(ctx, alice, "sb-alice", "big", strings.NewReader("four")); AsError(err).Code != CodePayloadTooLarge {
		t.Errorf("an upload over the cap: %v", err)
	}
	if _, err := svc.ImportFile(ctx, alice, "sb-alice", ImportParams{URL: "file:///etc/passwd"}); AsError(err).Code != CodeValidation {
		t.Errorf("a file: URL: %v", err)
	}
}

// TestCreateRecordsManagedCargo: a create without a cargo records the Manager's workspace as a managed cargo of the
// caller, which goes with the sandbox.
func TestCreateRecordsManagedCargo(t *testing.T) {
	ctx := context.Background()
	svc, sbs, _ := newTestService()
	sb, err := svc.CreateSandbox(ctx, Principal{Owner: "carol"}, CreateParams{})
	if err != nil || sb.Profile != DefaultProfile {
		t.Fatalf("create: %+v %v", sb, err)
	}
	if w := sbs.ws[sb.WorkspaceID]; w == nil || w.Owner != "carol" || !w.Managed || w.SizeLimitMB != 1024 {
		t.Fatalf("the managed cargo of %s: %+v", sb.ID, w)
	}
	// Attaching it as a cargo is the owner's alone.
	if _, err := svc.CreateSandbox(ctx, Principal{Owner: "dave"}, CreateParams{CargoID: &sb.WorkspaceID}); AsError(err).Code != CodeNotFound {
		t.Errorf("another owner attached carol's cargo: %v", err)
	}
	if _, err := svc.CreateSandbox(ctx, Principal{Owner: "carol"}, CreateParams{Profile: "nope"}); AsError(err).Code != CodeValidation {
		t.Errorf("unknown profile: %v", err)
	}
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "carol"}, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := sbs.ws[sb.WorkspaceID]; ok {
		t.Errorf("the managed cargo outlived its sandbox")
	}
}
