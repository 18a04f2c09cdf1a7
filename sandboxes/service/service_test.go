package service

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

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

// testBed is newTestService's world: the real Manager over sandboxestest's engine, its clock, and the ids the
// Manager gave the sandboxes and workspace the tests name.
type testBed struct {
	m      *sandboxes.Manager
	engine *sandboxestest.Engine
	clock  *sandboxestest.Clock
	ids    map[string]string // "sb-alice" -> the id the Manager made
}

// id is the Manager's id of the sandbox or workspace a test names ("sb-alice", "ws-bob"); a name the bed did not
// make ("sb-none") is itself.
func (b *testBed) id(name string) string {
	if id, ok := b.ids[name]; ok {
		return id
	}
	return name
}

// running is how many sandboxes run: every one of the bed's is stopped when it is made, so a call that started
// (held) one shows here.
func (b *testBed) running() int { return b.engine.Running() }

// status is sandbox name's status, "gone" when the Manager no longer has it.
func (b *testBed) status(t *testing.T, name string) sandboxes.Status {
	t.Helper()
	sb, err := b.m.Get(context.Background(), b.id(name))
	if err != nil {
		if AsError(err).Code == CodeNotFound {
			return "gone"
		}
		t.Fatal(err)
	}
	return sb.Status
}

// newTestService is the service over the real Manager (sandboxestest.NewManagerAt) holding alice's sandboxes
// (sb-alice, sb-alice2, sb-old that has expired, sb-nofiles whose profile has the shell alone), bob's sb-bob and
// bob's workspace ws-bob; every sandbox is stopped (idle), and a created one has the filesystem capability.
func newTestService(t *testing.T) (*Service, *testBed, *fakeAgent) {
	t.Helper()
	ctx := context.Background()
	clock := sandboxestest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, engine := sandboxestest.NewManagerAt(t, sandboxes.Config{GCInterval: time.Hour, Profiles: []sandboxes.Profile{
		{ID: DefaultProfile, Image: "img", Capabilities: []string{sandboxes.CapFilesystem}},
		{ID: "shell", Image: "img", Capabilities: []string{sandboxes.CapShell}},
		{ID: "web", Image: "img", Capabilities: []string{sandboxes.CapBrowser}, IdleTimeout: sandboxes.Duration(10 * time.Minute)},
	}}, clock.Now)
	b := &testBed{m: m, engine: engine, clock: clock, ids: map[string]string{}}
	for _, s := range []struct {
		name, owner, profile string
		ttl                  time.Duration
	}{
		{"sb-old", "alice", DefaultProfile, time.Minute},
		{"sb-alice", "alice", DefaultProfile, 0},
		{"sb-alice2", "alice", DefaultProfile, 0},
		{"sb-bob", "bob", DefaultProfile, 0},
		{"sb-nofiles", "alice", "shell", 0},
	} {
		b.ids[s.name] = b.make(t, s.owner, s.profile, s.ttl)
	}
	clock.Advance(2 * time.Minute) // sb-old's TTL is over
	if st := b.status(t, "sb-old"); st != sandboxes.StatusExpired {
		t.Fatalf("sb-old reads %s after its TTL", st)
	}
	w, err := m.CreateWorkspace(ctx, sandboxes.WorkspaceSpec{Owner: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	b.ids["ws-bob"] = w.ID
	agent := &fakeAgent{files: map[string]string{b.id("sb-bob") + "/secret.txt": "bob's", b.id("sb-alice") + "/notes.txt": "alice's"}}
	svc := New(Config{Sandboxes: m, Agent: agent, ManagedWorkspace: &sandboxes.WorkspaceSpec{Backend: "docker_volume", SizeLimitMB: 1024}, Exports: fakeExports{},
		Fetch: func(context.Context, *url.URL) (io.ReadCloser, error) {
			return nil, Errorf(CodeForbidden, "no network in this test")
		}})
	return svc, b, agent
}

// make creates a sandbox of owner's on profile, waits for it to be ready and stops it; ttl 0 is none.
func (b *testBed) make(t *testing.T, owner, profile string, ttl time.Duration) string {
	t.Helper()
	ctx := context.Background()
	sb, err := b.m.Create(ctx, sandboxes.CreateRequest{Owner: owner, Profile: profile, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	sandboxestest.WaitStatus(t, b.m, sb.ID, sandboxes.StatusReady)
	if err := b.m.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	return sb.ID
}

// TestOwnership performs the attacks of one tenant on another's sandboxes: each is answered as if the sandbox did
// not exist (not_found), the other's sandbox is never started, and nothing of it is read, written or deleted.
func TestOwnership(t *testing.T) {
	ctx := context.Background()
	alice := Principal{Owner: "alice"}
	tests := []struct {
		name string
		call func(*Service, *testBed) error
		code string
	}{
		{"read another's file", func(s *Service, b *testBed) error {
			_, err := s.ReadFile(ctx, alice, b.id("sb-bob"), "secret.txt")
			return err
		}, CodeNotFound},
		{"write another's file", func(s *Service, b *testBed) error {
			return s.WriteFile(ctx, alice, b.id("sb-bob"), "x", strings.NewReader("pwned"))
		}, CodeNotFound},
		{"upload into another's sandbox", func(s *Service, b *testBed) error {
			_, err := s.Upload(ctx, alice, b.id("sb-bob"), "x", strings.NewReader("pwned"))
			return err
		}, CodeNotFound},
		{"stop another's sandbox", func(s *Service, b *testBed) error { return s.StopSandbox(ctx, alice, b.id("sb-bob")) }, CodeNotFound},
		{"export another's file", func(s *Service, b *testBed) error {
			_, err := s.ExportFiles(ctx, alice, b.id("sb-bob"), []string{"secret.txt"})
			return err
		}, CodeNotFound},
		{"import from another's sandbox", func(s *Service, b *testBed) error {
			_, err := s.ImportFile(ctx, alice, b.id("sb-alice"), ImportParams{FromSandbox: b.id("sb-bob"), Path: "secret.txt"})
			return err
		}, CodeNotFound},
		{"import an unexported file of one's own", func(s *Service, b *testBed) error {
			_, err := s.ImportFile(ctx, alice, b.id("sb-alice2"), ImportParams{FromSandbox: b.id("sb-alice"), Path: "notes.txt"})
			return err
		}, CodeForbidden},
		{"attach another's cargo", func(s *Service, b *testBed) error {
			id := b.id("ws-bob")
			_, err := s.CreateSandbox(ctx, alice, CreateParams{CargoID: &id})
			return err
		}, CodeNotFound},
		{"climb out of the workspace", func(s *Service, b *testBed) error {
			_, err := s.ReadFile(ctx, alice, b.id("sb-alice"), "../../etc/passwd")
			return err
		}, CodeInvalidPath},
		{"use an expired sandbox", func(s *Service, b *testBed) error { _, err := s.ReadFile(ctx, alice, b.id("sb-old"), "a"); return err }, CodeSandboxExpired},
		{"use a capability the profile lacks", func(s *Service, b *testBed) error {
			_, err := s.ReadFile(ctx, alice, b.id("sb-nofiles"), "a")
			return err
		}, CodeCapability},
		{"ticket for another's sandbox", func(s *Service, b *testBed) error {
			_, err := New(Config{Sandboxes: s.cfg.Sandboxes, Tickets: TicketMinter{}}).IssueTicket(ctx, alice, b.id("sb-bob"), "vnc", true, time.Minute)
			return err
		}, CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc, b, agent := newTestService(t)
			err := tc.call(svc, b)
			if got := AsError(err).Code; got != tc.code {
				t.Fatalf("%v: code %s, want %s", err, got, tc.code)
			}
			if tc.code != CodeCapability && tc.code != CodeInvalidPath && b.running() != 0 {
				t.Errorf("a refused call started %d sandboxes", b.running())
			}
			if agent.files[b.id("sb-bob")+"/x"] != "" || agent.files[b.id("sb-bob")+"/secret.txt"] != "bob's" {
				t.Errorf("bob's workspace changed: %v", agent.files)
			}
		})
	}
}

// TestDeleteIsIdempotentAndScoped: deleting another's sandbox succeeds as if it were gone, and leaves it be.
func TestDeleteIsIdempotentAndScoped(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "alice"}, b.id("sb-bob")); err != nil {
		t.Fatalf("delete of another's sandbox: %v", err)
	}
	if _, err := b.m.Get(ctx, b.id("sb-bob")); err != nil {
		t.Fatalf("bob's sandbox was deleted by alice: %v", err)
	}
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "bob"}, b.id("sb-bob")); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteSandbox(ctx, Principal{Owner: "bob"}, b.id("sb-bob")); err != nil {
		t.Errorf("a second delete: %v", err)
	}
	admin := Principal{Owner: "ops", Admin: true}
	if err := svc.DeleteSandbox(ctx, admin, b.id("sb-alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Get(ctx, b.id("sb-alice")); err == nil {
		t.Errorf("an admin's delete left the sandbox")
	}
}

// TestTransferBetweenOwnSandboxes: an exported file of one's own sandbox is imported into another, within the cap.
func TestTransferBetweenOwnSandboxes(t *testing.T) {
	ctx := context.Background()
	svc, b, agent := newTestService(t)
	alice := Principal{Owner: "alice"}
	if _, err := svc.ExportFiles(ctx, alice, b.id("sb-alice"), []string{"./notes.txt"}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.ImportFile(ctx, alice, b.id("sb-alice2"), ImportParams{FromSandbox: b.id("sb-alice"), Path: "notes.txt", Destination: "in/copy.txt"})
	if err != nil || res.Size != int64(len("alice's")) || agent.files[b.id("sb-alice2")+"/in/copy.txt"] != "alice's" || res.Source != "sandbox:"+b.id("sb-alice")+"/notes.txt" {
		t.Fatalf("import: %+v %v", res, err)
	}
	small := New(Config{Sandboxes: svc.cfg.Sandboxes, Agent: agent, MaxUploadBytes: 3})
	if _, err := small.Upload(ctx, alice, b.id("sb-alice"), "big", strings.NewReader("four")); AsError(err).Code != CodePayloadTooLarge {
		t.Errorf("an upload over the cap: %v", err)
	}
	if _, err := svc.ImportFile(ctx, alice, b.id("sb-alice"), ImportParams{URL: "file:///etc/passwd"}); AsError(err).Code != CodeValidation {
		t.Errorf("a file: URL: %v", err)
	}
}

// TestCreateRecordsManagedCargo: a create without a cargo records the Manager's workspace as a managed cargo of the
// caller, which goes with the sandbox.
func TestCreateRecordsManagedCargo(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	sb, err := svc.CreateSandbox(ctx, Principal{Owner: "carol"}, CreateParams{})
	if err != nil || sb.Profile != DefaultProfile {
		t.Fatalf("create: %+v %v", sb, err)
	}
	if w, _ := b.m.Workspace(ctx, sb.WorkspaceID); w == nil || w.Owner != "carol" || !w.Managed || w.SizeLimitMB != 1024 {
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
	if w, err := b.m.Workspace(ctx, sb.WorkspaceID); err == nil || AsError(err).Code != CodeNotFound {
		t.Errorf("the managed cargo outlived its sandbox: %+v %v", w, err)
	}
}
