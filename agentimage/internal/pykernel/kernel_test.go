package pykernel

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// These run the real kernel program with the machine's python3 (the image tests cover matplotlib figures).
func newTestKernel(t *testing.T) *Kernel {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	k := New(Config{Dir: t.TempDir()})
	t.Cleanup(func() { k.Close() })
	return k
}

func TestKernelCells(t *testing.T) {
	k := newTestKernel(t)
	ctx := context.Background()
	tests := []struct {
		name, code                    string
		success                       bool
		result, stdout, stderr, ename string
	}{
		{name: "assign", code: "x = 40", success: true},
		{name: "state and trailing expression", code: "x + 2", success: true, result: "42"},
		{name: "None is no result", code: "None", success: true},
		{name: "print and repr", code: "print('hi')\n'a' * 3", success: true, result: "'aaa'", stdout: "hi\n"},
		{name: "stderr", code: "import sys; _ = sys.stderr.write('warn\\n')", success: true, stderr: "warn\n"},
		{name: "subprocess output", code: "import subprocess; subprocess.run(['echo', 'from child'])", success: true, result: "CompletedProcess(args=['echo', 'from child'], returncode=0)", stdout: "from child\n"},
		{name: "exception", code: "def f():\n    return 1/0\nf()", ename: "ZeroDivisionError"},
		{name: "syntax error", code: "def (", ename: "SyntaxError"},
		{name: "sys.exit is the cell's", code: "import sys; sys.exit(3)", ename: "SystemExit"},
		{name: "still alive", code: "x", success: true, result: "40"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := k.Exec(ctx, tc.code, 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.Success != tc.success || res.Stdout != tc.stdout || res.Stderr != tc.stderr {
				t.Fatalf("got %+v", res)
			}
			if got := deref(res.Result); got != tc.result {
				t.Fatalf("result %q, want %q", got, tc.result)
			}
			if tc.ename != "" {
				if res.Error == nil || res.Error.EName != tc.ename || len(res.Error.Traceback) == 0 {
					t.Fatalf("error %+v, want %s", res.Error, tc.ename)
				}
				if strings.Contains(strings.Join(res.Error.Traceback, ""), "<string>") {
					t.Fatalf("traceback shows kernel frames: %q", res.Error.Traceback)
				}
			}
		})
	}
}

func TestKernelTimeoutKeepsState(t *testing.T) {
	k := newTestKernel(t)
	ctx := context.Background()
	if _, err := k.Exec(ctx, "kept = 'yes'", 0); err != nil {
		t.Fatal(err)
	}
	res, err := k.Exec(ctx, "import time\nprint('before', flush=True)\ntime.sleep(30)", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Success || res.Error == nil || res.Error.EName != "KeyboardInterrupt" || res.Stdout != "before\n" {
		t.Fatalf("timeout result %+v %+v", res, res.Error)
	}
	res, err = k.Exec(ctx, "kept", 0)
	if err != nil || deref(res.Result) != "'yes'" || res.KernelRestarted {
		t.Fatalf("after timeout: %v %+v", err, res)
	}
}

func TestKernelTimeoutIgnoringInterruptIsKilled(t *testing.T) {
	k := newTestKernel(t)
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
	_, err := k.Exec(context.Background(), code, 200*time.Millisecond)
	var e *agentapi.Error
	if !errors.As(err, &e) || e.Code != agentapi.CodeKernelDied {
		t.Fatalf("want kernel_died, got %v", err)
	}
}

func TestKernelCrashRestarts(t *testing.T) {
	k := newTestKernel(t)
	ctx := context.Background()
	if _, err := k.Exec(ctx, "lost = 1", 0); err != nil {
		t.Fatal(err)
	}
	_, err := k.Exec(ctx, "import os\nprint('bye', flush=True)\nos._exit(7)", 0)
	var e *agentapi.Error
	if !errors.As(err, &e) || e.Code != agentapi.CodeKernelDied || e.Details["exit_code"] != 7 || e.Details["stdout"] != "bye\n" {
		t.Fatalf("want kernel_died with exit 7 and output, got %v %+v", err, e)
	}
	res, err := k.Exec(ctx, "'lost' in globals()", 0)
	if err != nil || !res.KernelRestarted || deref(res.Result) != "False" || res.ExecutionCount != 1 {
		t.Fatalf("after crash: %v %+v", err, res)
	}
	res, err = k.Exec(ctx, "1", 0)
	if err != nil || res.KernelRestarted {
		t.Fatalf("restart reported twice: %v %+v", err, res)
	}
}

func TestKernelRestartAndMissingPython(t *testing.T) {
	k := newTestKernel(t)
	ctx := context.Background()
	if _, err := k.Exec(ctx, "a = 1", 0); err != nil {
		t.Fatal(err)
	}
	rr, err := k.Restart(ctx)
	if err != nil || !rr.Restarted || rr.PythonVersion == "" {
		t.Fatalf("restart: %v %+v", err, rr)
	}
	res, err := k.Exec(ctx, "'a' in globals()", 0)
	if err != nil || deref(res.Result) != "False" || res.KernelRestarted {
		t.Fatalf("after restart: %v %+v", err, res)
	}

	missing := New(Config{Python: "no-such-python-here"})
	_, err = missing.Exec(ctx, "1", 0)
	var e *agentapi.Error
	if !errors.As(err, &e) || e.Code != agentapi.CodeNotSupported {
		t.Fatalf("want not_supported, got %v", err)
	}
}

func TestCaptureMarkerSplitAcrossReads(t *testing.T) {
	c := newCapture(1 << 10)
	c.expect([]byte("<END>"))
	for _, chunk := range []string{"hello <E", "N", "D>next"} {
		c.write([]byte(chunk))
	}
	if out, _ := c.take(0); out != "hello " {
		t.Fatalf("cell output %q", out)
	}
	if out, _ := c.take(0); out != "next" {
		t.Fatalf("following output %q", out)
	}
	small := newCapture(4)
	small.write([]byte("abcdefgh"))
	if out, trunc := small.take(0); out != "abcd" || !trunc {
		t.Fatalf("truncation: %q %v", out, trunc)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
