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

// newTestService is the service over the core's test double (sandboxestest.Core) holding alice's and bob's
// sandboxes and bob's workspace; a created sandbox is ready with the filesystem capability.
func newTestService() (*Service, *sandboxestest.Core, *fakeAgent) {
	sbs := sandboxestest.New([]sandboxes.Profile{{ID: DefaultProfile}},
		sandboxes.Sandbox{ID: "sb-alice", Owner: "alice", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem}},
		sandboxes.Sandbox{ID: "sb-alice2", Owner: "alice", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem},
			WorkspaceID: "ws-alice2"},
		sandboxes.Sandbox{ID: "sb-bob", Owner: "bob", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapFilesystem}},
		sandboxes.Sandbox{ID: "sb-old", Owner: "alice", Status: sandboxes.StatusExpired, Capabilities: []string{sandboxes.CapFilesystem}},
		sandboxes.Sandbox{ID: "sb-nofiles", Owner: "alice", Status: sandboxes.StatusReady, Capabilities: []string{sandboxes.CapShell}})
	sbs.CreatedCaps = []string{sandboxes.CapFilesystem}
	sbs.PutWorkspace(sandboxes.Workspace{ID: "ws-bob", Owner: "bob"})
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
			if tc.code != CodeCapability && tc.code != CodeInvalidPath && sbs.Holds() != 0 {
				t.Errorf("a refused call started %d sandboxes", sbs.Holds())
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
	if w, _ := sbs.Workspace(ctx, sb.WorkspaceID); w == nil || w.Owner != "carol" || !w.Managed || w.SizeLimitMB != 1024 {
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
	if sbs.HasWorkspace(sb.WorkspaceID) {
		t.Errorf("the managed cargo outlived its sandbox")
	}
}
