package browser

import (
	"context"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Restart backoff for supervised processes: doubling from minBackoff to maxBackoff, back to the minimum once a
// process has stayed up for stableAfter.
const (
	minBackoff  = 500 * time.Millisecond
	maxBackoff  = 30 * time.Second
	stableAfter = 30 * time.Second
	stopGrace   = 3 * time.Second
)

// procSpec describes one supervised program.
type procSpec struct {
	name string
	argv []string
	env  []string
	// prepare runs before every start (removing a dead predecessor's lock files, waiting for the display).
	prepare func(ctx context.Context) error
}

// supervised keeps one program running until its context ends.
type supervised struct {
	spec   procSpec
	logger *slog.Logger

	mu       sync.Mutex
	starts   int
	pid      int
	lastExit string
}

func newSupervised(spec procSpec, logger *slog.Logger) *supervised {
	return &supervised{spec: spec, logger: logger.With("process", spec.name)}
}

// Status is what /v1/browser/info and logs say about a supervised process.
type Status struct {
	Name     string `json:"name"`
	PID      int    `json:"pid,omitempty"`
	Starts   int    `json:"starts"`
	LastExit string `json:"last_exit,omitempty"`
}

func (s *supervised) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Name: s.spec.name, PID: s.pid, Starts: s.starts, LastExit: s.lastExit}
}

// run starts the program and restarts it whenever it exits, until ctx ends; then it stops the program's process
// group (TERM, then KILL after stopGrace).
func (s *supervised) run(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		if s.spec.prepare != nil {
			if err := s.spec.prepare(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.logger.Warn("not starting", "error", err)
				if !sleep(ctx, backoff) {
					return
				}
				backoff = min(backoff*2, maxBackoff)
				continue
			}
		}
		tail := &tailBuffer{max: 4 << 10}
		cmd := exec.Command(s.spec.argv[0], s.spec.argv[1:]...)
		cmd.Env = s.spec.env
		cmd.Stdout, cmd.Stderr = tail, tail
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		begun := time.Now()
		if err := cmd.Start(); err != nil {
			s.logger.Error("cannot start", "error", err)
			s.setExit("start failed: " + err.Error())
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		s.mu.Lock()
		s.starts++
		s.pid = cmd.Process.Pid
		s.mu.Unlock()
		s.logger.Info("started", "pid", cmd.Process.Pid)

		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(stopGrace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			return
		}
		// Whatever the program left behind in its group (Chromium's helpers) goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		why := "exited"
		if err != nil {
			why = err.Error()
		}
		s.setExit(why)
		s.logger.Warn("exited; restarting", "status", why, "ran", time.Since(begun).Round(time.Millisecond), "output_tail", tail.String())
		if time.Since(begun) > stableAfter {
			backoff = minBackoff
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (s *supervised) setExit(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = 0
	s.lastExit = why
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// tailBuffer keeps the last max bytes a process wrote, for the log line when it dies.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
