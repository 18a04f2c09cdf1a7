package main_test

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testenv"
)

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
