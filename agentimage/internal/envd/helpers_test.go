package envd

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem/filesystemconnect"
	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process/processconnect"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// testEnvd is envd over a temporary workspace, served by httptest, with JSON Connect clients as E2B's SDK uses.
type testEnvd struct {
	svc  *Service
	dir  string
	url  string
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
}

func newTestEnvd(t *testing.T) *testEnvd {
	t.Helper()
	dir := t.TempDir()
	root, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	procs := process.NewManager(process.Config{})
	t.Cleanup(procs.Close)
	svc := New(Deps{Root: root, Procs: procs, MaxFileBytes: 1 << 20, SandboxUser: "sandbox"})
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &testEnvd{
		svc: svc, dir: root.Dir(), url: srv.URL,
		proc: processconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithProtoJSON()),
		fs:   filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL, connect.WithProtoJSON()),
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// asUser sets E2B's user header (Authorization: Basic base64("<user>:")) on a request.
func asUser[T any](req *connect.Request[T], user string) *connect.Request[T] {
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	return req
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("want %v, got %v", code, err)
	}
}

func mustDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
