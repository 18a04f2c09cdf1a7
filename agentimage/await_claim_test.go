package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// TestAwaitClaimHelper is the agent itself when this test binary is run by TestAwaitClaim (and, after the claim,
// by the agent's own execve of this binary, with the same arguments).
func TestAwaitClaimHelper(t *testing.T) {
	if os.Getenv("SANDGATE_TEST_AGENT_MAIN") != "1" {
		t.Skip("run by TestAwaitClaim")
	}
	main()
}

// TestAwaitClaim runs the agent in its waiting form, as a warm sandbox of a caller-chosen image starts it, and
// attacks it before the claim: a claim without the token, or with another, is refused, and nothing but /health and
// the claim is served (no exec: nothing runs before the create's environment is there). The gateway's claim then
// makes it a full agent whose commands run in the claim's environment, without the waiting form.
func TestAwaitClaim(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAwaitClaimHelper$")
	cmd.Env = append(os.Environ(), "SANDGATE_TEST_AGENT_MAIN=1", agentapi.EnvAwaitClaim+"=1", agentapi.EnvToken+"=right-token",
		agentapi.EnvAddr+"=127.0.0.1:0", agentapi.EnvSocket+"="+sock, agentapi.EnvWorkspace+"="+dir,
		agentapi.EnvCapabilities+"=shell", "HOME="+filepath.Join(dir, "home"), "FROM_CONTAINER=kept")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	call := func(method, path, token string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://agent"+path, bytes.NewReader(b))
		if token != "" {
			req.Header.Set(agentapi.TokenHeader, token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.Bytes()
	}
	healthy := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			if code, _ := call("GET", "/health", "", nil); code == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the agent did not answer /health")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	healthy()

	claim := agentapi.ClaimRequest{Set: map[string]string{"FASTGPT_SESSION_ID": "s-1"}}
	for _, tt := range []struct {
		name, method, path, token string
		body                      any
		want                      int
	}{
		{"a claim without the token", "POST", agentapi.ClaimPath, "", claim, http.StatusUnauthorized},
		{"a claim with another token", "POST", agentapi.ClaimPath, "wrong-token", claim, http.StatusUnauthorized},
		{"a claim that is not one", "POST", agentapi.ClaimPath, "right-token", map[string]any{"set": map[string]string{"A=B": "c"}}, http.StatusBadRequest},
		{"an exec before the claim", "POST", "/v1/exec", "right-token", agentapi.ExecRequest{Cmd: "true"}, http.StatusNotFound},
		{"the agent's info before the claim", "GET", "/v1/info", "right-token", nil, http.StatusNotFound},
	} {
		if code, body := call(tt.method, tt.path, tt.token, tt.body); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
	}

	if code, body := call("POST", agentapi.ClaimPath, "right-token", claim); code != http.StatusNoContent {
		t.Fatalf("the claim: %d %s", code, body)
	}
	// The fresh agent serves exec, in the claim's environment and the container's, without the waiting form.
	var res agentapi.ExecResult
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body := call("POST", "/v1/exec", "right-token", agentapi.ExecRequest{Cmd: `echo "$FASTGPT_SESSION_ID $FROM_CONTAINER ${SANDGATE_AWAIT_CLAIM:-none}"`})
		if code == http.StatusOK {
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec after the claim: %d %s", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.TrimSpace(res.Stdout); got != "s-1 kept none" {
		t.Fatalf("a command after the claim sees %q, want the claim's and the container's environment", got)
	}
	if code, _ := call("POST", agentapi.ClaimPath, "right-token", claim); code != http.StatusNotFound {
		t.Errorf("a second claim reached a claimed agent: %d", code)
	}
}
