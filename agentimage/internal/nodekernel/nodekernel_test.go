package nodekernel

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func newKernel(t *testing.T) *Kernel {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed on this host")
	}
	k := New(Config{Dir: t.TempDir(), Env: os.Environ()})
	t.Cleanup(k.Close)
	return k
}

// TestKernelSession runs one session's cells in order: state, await, output, errors and timeouts all share a kernel.
func TestKernelSession(t *testing.T) {
	k := newKernel(t)
	ctx := context.Background()
	steps := []struct {
		name, code  string
		timeout     time.Duration
		success     bool
		result      string // want the value's inspect text (empty: no value)
		stdout      string // substring
		stderr      string // substring
		errName     string
		errContains string
		timedOut    bool
		restarted   bool
	}{
		{name: "declarations", code: "let a = 40; const b = 2; var c = 'x'; function add(x, y) { return x + y }", success: true},
		{name: "declarations persist", code: "add(a, b) + c.length", success: true, result: "43"},
		{name: "console captured", code: "console.log('hello', {n: 1}); console.error('oops'); 7", success: true, result: "7", stdout: "hello { n: 1 }\n", stderr: "oops\n"},
		{name: "top-level await keeps declarations", code: "const t = await new Promise(r => setTimeout(() => r(5), 20)); let u = t * 2; u", success: true, result: "10"},
		{name: "awaited declaration persists", code: "t + u", success: true, result: "15"},
		{name: "returned promise awaited", code: "new Promise(r => setTimeout(() => r('done'), 20))", success: true, result: "'done'"},
		{name: "require works", code: "require('path').join('a', 'b')", success: true, result: "'a/b'"},
		{name: "error with stack", code: "function boom() { throw new TypeError('bad thing') }\nboom()", errName: "TypeError", errContains: "bad thing"},
		{name: "rejected promise", code: "await Promise.reject(new RangeError('nope'))", errName: "RangeError", errContains: "nope"},
		{name: "syntax error", code: "let = = 3", errName: "SyntaxError"},
		{name: "sync infinite loop interrupted", code: "while (true) {}", timeout: 300 * time.Millisecond, timedOut: true, errName: "TimeoutError"},
		{name: "state survives the sync timeout", code: "a", success: true, result: "40"},
		{name: "pending promise times out", code: "await new Promise(() => {})", timeout: 300 * time.Millisecond, timedOut: true, errName: "TimeoutError"},
		{name: "state survives the async timeout", code: "b", success: true, result: "2"},
		{name: "blocked event loop restarts the kernel", code: "await null; while (true) {}", timeout: 300 * time.Millisecond, timedOut: true, restarted: true, errName: "KernelError", errContains: "restarted"},
		{name: "fresh kernel after restart", code: "typeof a", success: true, result: "'undefined'"},
		{name: "process.exit ends the kernel", code: "process.exit(3)", restarted: true, errName: "KernelError", errContains: "exited (code 3)"},
		{name: "kernel back after exit", code: "1 + 1", success: true, result: "2"},
	}
	for _, s := range steps {
		res, err := k.Exec(ctx, s.code, s.timeout)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := ""
		if res.Result != nil {
			got = *res.Result
		}
		if res.Success != s.success || got != s.result || res.TimedOut != s.timedOut || res.KernelRestarted != s.restarted {
			t.Fatalf("%s: got %+v (result %q, error %+v)", s.name, res, got, res.Error)
		}
		if !strings.Contains(res.Stdout, s.stdout) || !strings.Contains(res.Stderr, s.stderr) {
			t.Fatalf("%s: stdout %q stderr %q", s.name, res.Stdout, res.Stderr)
		}
		if s.errName != "" {
			if res.Error == nil || res.Error.EName != s.errName || !strings.Contains(res.Error.EValue, s.errContains) || len(res.Error.Traceback) == 0 {
				t.Fatalf("%s: error %+v", s.name, res.Error)
			}
		} else if res.Error != nil {
			t.Fatalf("%s: unexpected error %+v", s.name, res.Error)
		}
	}
}

func TestStackNamesTheCell(t *testing.T) {
	k := newKernel(t)
	res, err := k.Exec(context.Background(), "\n\nnull.x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "cell-1.js:3") {
		t.Fatalf("stack should name cell-1.js:3: %+v", res.Error)
	}
}

func TestNodeMissing(t *testing.T) {
	k := New(Config{Bin: "/nonexistent/node"})
	if _, err := k.Exec(context.Background(), "1", 0); err != ErrNodeMissing {
		t.Fatalf("want ErrNodeMissing, got %v", err)
	}
}

// FuzzKernelLines: any line on fd 4 (tenant code can write to it) is either an output line, a result line or
// refused, without a panic.
func FuzzKernelLines(f *testing.F) {
	f.Add(`{"id":"x1","stream":"stdout","text":"hi\n"}`)
	f.Add(`{"id":"x1","success":true,"stdout":"a","result":"1","error":{"name":"E","message":"m","stack":"s\nt"}}`)
	f.Add(`{"id":"x1","stream":"other","text":5}`)
	f.Fuzz(func(t *testing.T, line string) {
		if id, stream, _, ok := spec.Output(line); ok && stream != "stdout" && stream != "stderr" {
			t.Fatalf("output line %q: stream %q (id %q)", line, stream, id)
		}
		_, _, _ = spec.Decode(line, 0)
	})
}
