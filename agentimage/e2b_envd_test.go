package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	fspb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem/filesystemconnect"
	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
	"github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process/processconnect"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// envdClient talks to the agent's envd with its token, as the gateway's E2B edge forwards the SDK's calls.
type envdClient struct {
	sb   *testenv.Sandbox
	base string
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
}

func newEnvdClient(sb *testenv.Sandbox) *envdClient {
	base := sb.URL + agentapi.E2BEnvdPrefix
	hc := &http.Client{}
	opts := []connect.ClientOption{connect.WithProtoJSON(), connect.WithInterceptors(tokenInterceptor(sb.Token))}
	return &envdClient{sb: sb, base: base,
		proc: processconnect.NewProcessClient(hc, base, opts...), fs: filesystemconnect.NewFilesystemClient(hc, base, opts...)}
}

type tokenInterceptor string

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set(agentapi.TokenHeader, string(t))
		req.Header().Set(agentapi.E2BEnvHeader, `{"SBX_VAR":"from-create"}`)
		return next(ctx, req)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(agentapi.TokenHeader, string(t))
		conn.RequestHeader().Set(agentapi.E2BEnvHeader, `{"SBX_VAR":"from-create"}`)
		return conn
	}
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// run starts a command and collects its stdout and end event.
func (c *envdClient) run(t *testing.T, ctx context.Context, cmd string) (string, *pb.ProcessEvent_EndEvent) {
	t.Helper()
	stdin := false
	st, err := c.proc.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}, Stdin: &stdin}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	var end *pb.ProcessEvent_EndEvent
	for st.Receive() {
		ev := st.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		if ev.GetEnd() != nil {
			end = ev.GetEnd()
		}
	}
	if err := st.Err(); err != nil || end == nil {
		t.Fatalf("%q: %v (end %v)", cmd, err, end)
	}
	return out.String(), end
}

// TestE2BEnvdInSandbox drives envd in the real image on the agent's port: /home/user is the workspace for files
// and for processes, output streams whole, the sandbox env reaches processes, and root is refused.
func TestE2BEnvdInSandbox(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{})
	c := newEnvdClient(sb)
	ctx := testCtx(t)

	// without the agent token nothing is served, /health included
	resp, err := http.Get(c.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("envd without the agent token: %d", resp.StatusCode)
	}

	// upload two files the way the SDK's files.write([...]) does
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, data := range map[string]string{"/home/user/up.txt": "uploaded", "/home/user/d/e.txt": "nested"} {
		w, _ := mw.CreateFormFile("file", name)
		_, _ = w.Write([]byte(data))
	}
	_ = mw.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set(agentapi.TokenHeader, sb.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"path":"/home/user/d/e.txt"`) {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	if out, _ := dockerExec(t, sb, "cat", "/workspace/d/e.txt"); out != "nested" {
		t.Fatalf("the upload is not in the workspace: %q", out)
	}

	out, end := c.run(t, ctx, `echo "$HOME|$(pwd)|$USER|$SBX_VAR|$(cat up.txt)"`)
	if out != "/home/user|/home/user|user|from-create|uploaded\n" || end.GetExitCode() != 0 {
		t.Fatalf("process view: %q %+v", out, end)
	}
	out, end = c.run(t, ctx, "head -c 2000000 /dev/zero | tr '\\0' a; exit 4")
	if len(out) != 2000000 || strings.Trim(out, "a") != "" || end.GetExitCode() != 4 {
		t.Fatalf("2 MB output: %d bytes, end %+v", len(out), end)
	}

	// what a process writes in /home/user is a workspace file, listed by the file service
	c.run(t, ctx, "echo made > /home/user/by-process.txt")
	st, err := c.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/home/user/by-process.txt"}))
	if err != nil || st.Msg.GetEntry().GetSize() != 5 {
		t.Fatalf("stat: %v %+v", err, st)
	}
	if out, _ := dockerExec(t, sb, "cat", "/workspace/by-process.txt"); out != "made" {
		t.Fatalf("by-process.txt in the workspace: %q", out)
	}

	rootReq := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "id"}})
	rootReq.Header().Set("Authorization", "Basic cm9vdDo=") // root:
	rst, err := c.proc.Start(ctx, rootReq)
	if err != nil {
		t.Fatal(err)
	}
	for rst.Receive() {
		t.Fatalf("root ran: %v", rst.Msg())
	}
	if connect.CodeOf(rst.Err()) != connect.CodePermissionDenied || !strings.Contains(rst.Err().Error(), "no root") {
		t.Fatalf("root: %v", rst.Err())
	}

	envs, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/envs", nil)
	if err != nil {
		t.Fatal(err)
	}
	envs.Header.Set(agentapi.TokenHeader, sb.Token)
	envs.Header.Set(agentapi.E2BEnvHeader, `{"A":"b"}`)
	resp, err = http.DefaultClient.Do(envs)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got["A"] != "b" {
		t.Fatalf("envs %v", got)
	}
}
