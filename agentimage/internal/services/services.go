// Package services supervises the long-running processes a profile declares (a web app, a database): each runs as
// `bash -c <command>` in its own process group, its output kept in a small ring of lines, and it is restarted per
// its policy with exponential backoff.
package services

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Service states.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateBackoff  = "backoff" // exited, waiting to be restarted
	StateExited   = "exited"  // exited and not restarted (policy)
	StateStopped  = "stopped" // the supervisor is shutting down
)

const (
	logLines     = 50
	minBackoff   = 250 * time.Millisecond
	maxBackoff   = 30 * time.Second
	stableRun    = 10 * time.Second // a run this long resets the backoff
	reportedLogs = 20
)

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Validate checks specs and fills the default restart policy (always).
func Validate(specs []agentapi.ServiceSpec) ([]agentapi.ServiceSpec, error) {
	seen := map[string]bool{}
	out := make([]agentapi.ServiceSpec, len(specs))
	for i, s := range specs {
		if !namePattern.MatchString(s.Name) {
			return nil, fmt.Errorf("service %d: name %q must be lowercase letters, digits, '_' or '-' (at most 32)", i, s.Name)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("service %q declared twice", s.Name)
		}
		seen[s.Name] = true
		if s.Command == "" {
			return nil, fmt.Errorf("service %q: command is empty", s.Name)
		}
		if s.Port < 0 || s.Port > 65535 {
			return nil, fmt.Errorf("service %q: port %d is not a port", s.Name, s.Port)
		}
		switch s.Restart {
		case "":
			s.Restart = agentapi.RestartAlways
		case agentapi.RestartAlways, agentapi.RestartOnFailure, agentapi.RestartNever:
		default:
			return nil, fmt.Errorf("service %q: restart must be always, on-failure or never, not %q", s.Name, s.Restart)
		}
		for k := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("service %q: invalid env name %q", s.Name, k)
			}
		}
		out[i] = s
	}
	return out, nil
}

// Supervisor runs a fixed set of services.
type Supervisor struct {
	dir    string
	logger *slog.Logger
	svcs   []*service
	wg     sync.WaitGroup
}

type service struct {
	spec agentapi.ServiceSpec

	mu       sync.Mutex
	state    string
	pid      int
	restarts int
	exitCode *int
	lines    []string
}

// New returns a supervisor for validated specs, running them in dir.
func New(specs []agentapi.ServiceSpec, dir string, logger *slog.Logger) *Supervisor {
	s := &Supervisor{dir: dir, logger: logger}
	for _, spec := range specs {
		s.svcs = append(s.svcs, &service{spec: spec, state: StateStarting})
	}
	return s
}

// Start launches every service; they stop when ctx ends.
func (s *Supervisor) Start(ctx context.Context) {
	for _, svc := range s.svcs {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.supervise(ctx, svc)
		}()
	}
}

// Wait returns once every service has stopped (after ctx ended).
func (s *Supervisor) Wait() { s.wg.Wait() }

// Status lists the services in declaration order.
func (s *Supervisor) Status() []agentapi.ServiceStatus {
	out := make([]agentapi.ServiceStatus, 0, len(s.svcs))
	for _, svc := range s.svcs {
		svc.mu.Lock()
		lines := svc.lines
		if len(lines) > reportedLogs {
			lines = lines[len(lines)-reportedLogs:]
		}
		st := agentapi.ServiceStatus{Name: svc.spec.Name, State: svc.state, PID: svc.pid, Restarts: svc.restarts,
			Port: svc.spec.Port, ExitCode: svc.exitCode, LastLog: append([]string{}, lines...)}
		svc.mu.Unlock()
		out = append(out, st)
	}
	return out
}

func (s *Supervisor) supervise(ctx context.Context, svc *service) {
	backoff := minBackoff
	for {
		began := time.Now()
		code, err := s.runOnce(ctx, svc)
		if ctx.Err() != nil {
			svc.set(func() { svc.state, svc.pid = StateStopped, 0 })
			return
		}
		if err != nil {
			svc.appendLine(fmt.Sprintf("[sandgate] could not start: %v", err))
			code = -1
		}
		restart := svc.spec.Restart == agentapi.RestartAlways || (svc.spec.Restart == agentapi.RestartOnFailure && code != 0)
		svc.set(func() {
			c := code
			svc.exitCode, svc.pid = &c, 0
			svc.state = StateExited
			if restart {
				svc.state = StateBackoff
			}
		})
		s.logger.Warn("service exited", "service", svc.spec.Name, "exit_code", code, "restart", restart)
		if !restart {
			return
		}
		if time.Since(began) >= stableRun {
			backoff = minBackoff
		}
		select {
		case <-ctx.Done():
			svc.set(func() { svc.state = StateStopped })
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
		svc.set(func() { svc.restarts++; svc.state = StateStarting })
	}
}

// runOnce runs the service until it exits and returns its exit code (-1 for a signal).
func (s *Supervisor) runOnce(ctx context.Context, svc *service) (int, error) {
	cmd := exec.Command("bash", "-c", svc.spec.Command)
	cmd.Dir = s.dir
	cmd.Env = os.Environ()
	for k, v := range svc.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if svc.spec.Port > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("PORT=%d", svc.spec.Port))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	// A daemonised grandchild holding the output pipe must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		pw.Close()
		return 0, err
	}
	svc.set(func() { svc.pid, svc.state = cmd.Process.Pid, StateRunning })
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			svc.appendLine(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
	}
	// The group may hold children of bash that outlive it; they belong to this run.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	pw.Close()
	<-lines
	if err == nil {
		return 0, nil
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	return -1, nil
}

func (svc *service) set(f func()) {
	svc.mu.Lock()
	f()
	svc.mu.Unlock()
}

func (svc *service) appendLine(l string) {
	svc.mu.Lock()
	svc.lines = append(svc.lines, l)
	if len(svc.lines) > logLines {
		svc.lines = svc.lines[len(svc.lines)-logLines:]
	}
	svc.mu.Unlock()
}
