package linekernel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// shellProgram is a kernel in sh: ready, then per request line "<id> <ms> <code>" it answers "<id> <code>", exits
// with 3 on "exit", never answers on "hang", and keeps a counter across cells (its state).
const shellProgram = `exec 0</dev/null
echo ready >&4
n=0
while read -r id ms code <&3; do
  case "$code" in
    exit) exit 3 ;;
    hang) sleep 600 ;;
  esac
  n=$((n+1))
  echo "$id $code $n" >&4
done
`

var errShellMissing = errors.New("no such shell")

func shellSpec() Spec {
	return Spec{
		Name: "the shell kernel", LogName: "shell kernel", Missing: errShellMissing,
		Args: []string{"-c", "eval \"$(cat)\""}, Program: shellProgram,
		Ready:          func(l string) bool { return l == "ready" },
		DefaultTimeout: 5 * time.Second, MaxTimeout: 10 * time.Second,
		Grace: 100 * time.Millisecond, StartTimeout: time.Minute, MaxLine: 1 << 20,
		Encode: func(id, code string, timeout time.Duration, _ bool) ([]byte, error) {
			return []byte(id + " " + timeout.String() + " " + code), nil
		},
		Decode: func(l string, _ time.Duration) (agentapi.KernelExecResult, string, error) {
			id, out, _ := strings.Cut(l, " ")
			return agentapi.KernelExecResult{Success: true, Stdout: out}, id, nil
		},
		Blocked: func(timeout time.Duration) string { return "blocked past " + timeout.String() },
	}
}

// TestKernelLifecycle runs one kernel through the states the Node and R kernels share: state kept across cells, a
// process that exits mid-cell, a cell past its deadline, and a fresh process after each.
func TestKernelLifecycle(t *testing.T) {
	k := New(shellSpec(), Config{Bin: "sh"})
	t.Cleanup(k.Close)
	ctx := context.Background()
	steps := []struct {
		name, code string
		timeout    time.Duration
		stdout     string // exact, for answered cells
		errPart    string // in the KernelError's value, for lost ones
		timedOut   bool
		restarted  bool
	}{
		{name: "first cell", code: "a", stdout: "a 1"},
		{name: "state kept", code: "b", stdout: "b 2"},
		{name: "exit mid-cell", code: "exit", errPart: "the shell kernel exited (code 3)", restarted: true},
		{name: "fresh process", code: "c", stdout: "c 1"},
		{name: "blocked cell", code: "hang", timeout: 200 * time.Millisecond, errPart: "blocked past 200ms", timedOut: true, restarted: true},
		{name: "fresh after block", code: "d", stdout: "d 1"},
	}
	for _, s := range steps {
		res, err := k.Exec(ctx, s.code, s.timeout)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if res.TimedOut != s.timedOut || res.KernelRestarted != s.restarted {
			t.Fatalf("%s: %+v", s.name, res)
		}
		if s.errPart == "" {
			if !res.Success || res.Stdout != s.stdout || res.Error != nil {
				t.Fatalf("%s: %+v", s.name, res)
			}
			continue
		}
		if res.Success || res.Error == nil || res.Error.EName != "KernelError" || !strings.Contains(res.Error.EValue, s.errPart) {
			t.Fatalf("%s: %+v (error %+v)", s.name, res, res.Error)
		}
	}
}

func TestKernelDoesNotStart(t *testing.T) {
	missing := New(shellSpec(), Config{Bin: "/nonexistent/sh"})
	if _, err := missing.Exec(context.Background(), "a", 0); err != errShellMissing {
		t.Fatalf("missing binary: want the Spec's error as is, got %v", err)
	}
	spec := shellSpec()
	spec.Program = "echo hello >&4; sleep 600"
	k := New(spec, Config{Bin: "sh"})
	t.Cleanup(k.Close)
	if _, err := k.Exec(context.Background(), "a", 0); err == nil || !strings.Contains(err.Error(), `the shell kernel did not start (first line "hello")`) {
		t.Fatalf("wrong first line: %v", err)
	}
}

// TestServeExec: bad requests are refused before a kernel starts; a missing interpreter is not_supported.
func TestServeExec(t *testing.T) {
	ok := New(shellSpec(), Config{Bin: "sh"})
	t.Cleanup(ok.Close)
	missing := New(shellSpec(), Config{Bin: "/nonexistent/sh"})
	for _, c := range []struct {
		name   string
		k      *Kernel
		body   string
		status int
		part   string
	}{
		{"runs", ok, `{"code":"x"}`, http.StatusOK, `"stdout":"x 1"`},
		{"not JSON", ok, `{`, http.StatusBadRequest, "reading the request body"},
		{"unknown field", ok, `{"code":"x","nope":1}`, http.StatusBadRequest, "reading the request body"},
		{"empty code", ok, `{"code":"  "}`, http.StatusBadRequest, "code is empty"},
		{"negative timeout", ok, `{"code":"x","timeout_ms":-1}`, http.StatusBadRequest, "timeout_ms must be between 1 and 10000 (0 means 5000)"},
		{"timeout too long", ok, `{"code":"x","timeout_ms":10001}`, http.StatusBadRequest, "timeout_ms"},
		{"no interpreter", missing, `{"code":"x"}`, http.StatusNotImplemented, "no such shell"},
	} {
		rec := httptest.NewRecorder()
		c.k.ServeExec(rec, httptest.NewRequest(http.MethodPost, "/v1/sh/exec", strings.NewReader(c.body)))
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.part) {
			t.Errorf("%s: %d %s", c.name, rec.Code, rec.Body.String())
		}
	}
}

// TestTeeKeepsCellsApart: the copy of a cell's stdout on fd 5 may arrive in any split around the cell's result;
// each cell's Output gets its own bytes once, and what the result carries but the pipe has not delivered is left
// for ExecStream to hand out.
func TestTeeKeepsCellsApart(t *testing.T) {
	var tt tee
	var got []string
	out := func(_ string, p []byte) { got = append(got, string(p)) }
	tt.begin(out)
	tt.write([]byte("ab"))
	if n := tt.end(len("abcd")); n != 2 { // "cd" is still in the pipe
		t.Fatalf("first cell: %d streamed", n)
	}
	tt.begin(out)
	tt.write([]byte("cdxy")) // the first cell's late bytes, then the second cell's
	tt.write([]byte("z"))
	if n := tt.end(len("xyz")); n != 3 {
		t.Fatalf("second cell: %d streamed", n)
	}
	tt.begin(nil) // a cell nobody streams: read and dropped
	tt.write([]byte("q"))
	if n := tt.end(len("qr")); n != 0 {
		t.Fatalf("unstreamed cell: %d", n)
	}
	tt.begin(out)
	tt.write([]byte("r1"))
	if n := tt.end(1); n != 1 {
		t.Fatalf("fourth cell: %d", n)
	}
	if strings.Join(got, "|") != "ab|xy|z|1" {
		t.Fatalf("streamed %q", got)
	}
}

// TestExecStreamHandsOutTheRest: a kernel that does not stream still gives ExecStream's Output the whole of its
// result's stdout, once.
func TestExecStreamHandsOutTheRest(t *testing.T) {
	k := New(shellSpec(), Config{Bin: "sh"})
	t.Cleanup(k.Close)
	var got []string
	res, err := k.ExecStream(context.Background(), "a", 0, func(stream string, p []byte) { got = append(got, stream+":"+string(p)) })
	if err != nil || res.Stdout != "a 1" || strings.Join(got, "|") != "stdout:a 1" {
		t.Fatalf("%+v %v %q", res, err, got)
	}
}
