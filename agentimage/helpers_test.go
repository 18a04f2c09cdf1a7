package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// eachRuntime runs run once under the engine's default runtime and once under gVisor ("runsc"), whose subtest
// skips, saying why, where runsc cannot be registered (make test registers it).
func eachRuntime(t *testing.T, run func(t *testing.T, runtime string)) {
	for _, rt := range []struct{ name, runtime string }{{"runc", ""}, {"runsc", "runsc"}} {
		t.Run(rt.name, func(t *testing.T) {
			if rt.runtime != "" {
				testenv.Runsc(t)
			}
			run(t, rt.runtime)
		})
	}
}

func clientFor(sb *testenv.Sandbox) *agentapi.Client {
	return agentapi.NewClient(sb.URL, sb.Token, &http.Client{})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails unless err is a typed agent error with code (and, if status > 0, that HTTP status).
func wantCode(t *testing.T, err error, code string, status int) *agentapi.Error {
	t.Helper()
	var e *agentapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s error, got %v", code, err)
	}
	if e.Code != code || (status > 0 && e.HTTPStatus != status) {
		t.Fatalf("want %s (%d), got %s (%d): %s", code, status, e.Code, e.HTTPStatus, e.Message)
	}
	return e
}

// dockerExec runs a command in the sandbox and returns its output and exit code, failing only if docker fails.
func dockerExec(t *testing.T, sb *testenv.Sandbox, argv ...string) (string, int) {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", sb.Name}, argv...)...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("docker exec: %v", err)
	}
	return strings.TrimSpace(string(out)), 0
}

// waitFinal polls a process until it has ended.
func waitFinal(t *testing.T, ctx context.Context, c *agentapi.Client, id string) agentapi.ExecResult {
	t.Helper()
	for {
		res, err := c.Process(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Final() {
			return res
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %s did not end: %+v", id, res)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kernelExec runs code on the sandbox's kernel ("node", "r") through POST /v1/<kernel>/exec and fails the test
// unless the agent answers 200.
func kernelExec(t *testing.T, sb *testenv.Sandbox, kernel, code string, timeoutMS int64) agentapi.KernelExecResult {
	t.Helper()
	body, _ := json.Marshal(agentapi.KernelExecRequest{Code: code, TimeoutMS: timeoutMS})
	req, _ := sb.Request(context.Background(), http.MethodPost, "/v1/"+kernel+"/exec", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s exec %q: %s %s", kernel, code, resp.Status, raw)
	}
	var res agentapi.KernelExecResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}
