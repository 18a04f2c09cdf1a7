package entrypoint

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		argv    []string
		ok, err bool
	}{
		{name: "plain agent", args: nil},
		{name: "other command", args: []string{"healthcheck"}},
		{name: "supervise alone", args: []string{"supervise"}, ok: true},
		{name: "supervise empty", args: []string{"supervise", "--"}, ok: true},
		{name: "supervise argv", args: []string{"supervise", "--", "/entrypoint.sh", "-x", "--"}, argv: []string{"/entrypoint.sh", "-x", "--"}, ok: true},
		{name: "missing separator", args: []string{"supervise", "/entrypoint.sh"}, ok: true, err: true},
		{name: "empty program", args: []string{"supervise", "--", ""}, ok: true, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, ok, err := ParseArgs(tc.args)
			if ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("ParseArgs(%q) = %q, %v, %v", tc.args, argv, ok, err)
			}
			if strings.Join(argv, "\x00") != strings.Join(tc.argv, "\x00") {
				t.Fatalf("argv = %q, want %q", argv, tc.argv)
			}
		})
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("supervise\x00--\x00/bin/sh\x00-c\x00echo")
	f.Add("supervise\x00/bin/sh")
	f.Add("")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		argv, ok, err := ParseArgs(args)
		if err == nil && ok && len(argv) > 0 && argv[0] == "" {
			t.Fatalf("accepted an empty program: %q", args)
		}
		if !ok && (argv != nil || err != nil) {
			t.Fatalf("not the supervise form but answered %q, %v", argv, err)
		}
	})
}

// syncBuffer is a bytes.Buffer the child's output copier and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestChildExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		argv   []string
		code   int
		output string
	}{
		{name: "exit 0", argv: []string{"/bin/sh", "-c", "echo out; echo err >&2"}, code: 0, output: "out\nerr\n"},
		{name: "exit 3", argv: []string{"/bin/sh", "-c", "exit 3"}, code: 3},
		{name: "killed", argv: []string{"/bin/sh", "-c", "kill -KILL $$"}, code: 137},
		{name: "segv", argv: []string{"/bin/sh", "-c", "kill -SEGV $$"}, code: 139},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			c := New(tc.argv, &out, &out)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			<-c.Done()
			if got := c.ExitCode(); got != tc.code {
				t.Fatalf("exit code %d, want %d", got, tc.code)
			}
			if st := c.Status(); st.Running || st.ExitCode == nil || *st.ExitCode != tc.code {
				t.Fatalf("status %+v", st)
			}
			if tc.output != "" && out.String() != tc.output {
				t.Fatalf("output %q, want %q", out.String(), tc.output)
			}
		})
	}
}

func TestChildNotFound(t *testing.T) {
	c := New([]string{"/nonexistent/entrypoint.sh"}, nil, nil)
	if err := c.Start(); err == nil {
		t.Fatal("started a missing program")
	}
	<-c.Done()
	if c.ExitCode() != ExitNotFound || c.Status().Error == "" {
		t.Fatalf("status %+v", c.Status())
	}
}

func TestChildEnvAndStop(t *testing.T) {
	t.Setenv("SANDGATE_TEST_CHILD_ENV", "from-agent")
	var out syncBuffer
	// The child and a grandchild of its group: Stop must end both, and the child must see the agent's env.
	c := New([]string{"/bin/sh", "-c", "echo \"env=$SANDGATE_TEST_CHILD_ENV\"; sleep 600 & wait"}, &out, &out)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "env=from-agent") {
		if time.Now().After(deadline) {
			t.Fatalf("the child never printed its env: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := c.Status(); !st.Running || st.PID == 0 {
		t.Fatalf("status %+v", st)
	}
	c.Stop(context.Background(), 5*time.Second)
	select {
	case <-c.Done():
	default:
		t.Fatal("Stop returned before the child exited")
	}
	if got := c.ExitCode(); got != 128+15 {
		t.Fatalf("exit code %d after SIGTERM, want 143", got)
	}
}
