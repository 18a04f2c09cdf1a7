package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
)

// Spec is what to run. Dir must already be resolved inside the workspace.
type Spec struct {
	Cmd       string
	Argv      []string
	Dir       string
	Env       map[string]string
	Stdin     []byte
	KeepStdin bool
	// Timeout is the hard limit (0: none).
	Timeout time.Duration
	Tag     string
	PTY     *agentapi.PTYSize
	// Combined sends stderr into the stdout ring: one interleaved stream, in the order the bytes were written (the
	// execd API's background commands have one log).
	Combined bool
}

// Process is one started command.
type Process struct {
	ID      string
	Tag     string
	Cmd     string
	Argv    []string
	PID     int
	PTY     bool
	started time.Time

	// Combined: stderr went into the stdout ring (Spec.Combined).
	Combined bool

	stdout, stderr *ring.Ring
	done           chan struct{}
	killGrace      time.Duration
	onEnd          func()

	mu       sync.Mutex
	stdin    io.WriteCloser // nil once closed or when there is none
	ptyFile  *os.File
	status   string
	exitCode *int
	signal   string
	ended    time.Time
	reason   string // timed_out or killed, set before the kill
}

// Start runs spec. Errors starting it (no such binary, bad cwd) are returned; a non-zero exit is not an error.
func (m *Manager) Start(spec Spec) (*Process, error) {
	argv := spec.Argv
	if spec.Cmd != "" && len(argv) > 0 {
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "give cmd or argv, not both")
	}
	if spec.Cmd != "" {
		argv = []string{"/bin/bash", "-c", spec.Cmd}
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "cmd or argv is required")
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "argument contains a NUL byte")
		}
	}
	defaults := map[string]string{"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
	if spec.PTY != nil {
		defaults = map[string]string{"TERM": "xterm-256color"}
	}
	env, err := buildEnv(m.cfg.BaseEnv, defaults, spec.Env)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Dir: spec.Dir, Env: env, WaitDelay: m.cfg.WaitDelay}
	p := &Process{
		ID: NewID("proc_"), Tag: spec.Tag, Cmd: spec.Cmd, Argv: spec.Argv, PTY: spec.PTY != nil, Combined: spec.Combined && spec.PTY == nil,
		started: time.Now(), stdout: m.newRing(), stderr: m.newRing(), done: make(chan struct{}),
		killGrace: m.cfg.KillGrace, status: agentapi.StatusRunning,
		onEnd: func() { m.sweep(time.Now()) },
	}
	if spec.PTY != nil {
		err = p.startPTY(cmd, spec, m.cfg.WaitDelay)
	} else {
		err = p.startPipes(cmd, spec)
	}
	if err != nil {
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "starting %s: %v", argv[0], err)
	}
	p.PID = cmd.Process.Pid
	m.add(p)
	if spec.Timeout > 0 {
		timer := time.AfterFunc(spec.Timeout, func() { p.terminate(agentapi.StatusTimedOut) })
		go func() { <-p.done; timer.Stop() }()
	}
	return p, nil
}

func (p *Process) startPipes(cmd *exec.Cmd, spec Spec) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if spec.Combined {
		cmd.Stderr = p.stdout // one writer for both: exec.Cmd shares one pipe when Stdout == Stderr
	}
	switch {
	case spec.KeepStdin:
		w, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		p.stdin = w
		if len(spec.Stdin) > 0 {
			// the pipe buffer may be smaller than the data: write it from the background
			go func() { _, _ = w.Write(spec.Stdin) }()
		}
	case len(spec.Stdin) > 0:
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go p.wait(cmd, nil)
	return nil
}

func (p *Process) startPTY(cmd *exec.Cmd, spec Spec, waitDelay time.Duration) error {
	size := &pty.Winsize{Cols: spec.PTY.Cols, Rows: spec.PTY.Rows}
	if size.Cols == 0 {
		size.Cols = agentapi.DefaultPTYCols
	}
	if size.Rows == 0 {
		size.Rows = agentapi.DefaultPTYRows
	}
	// pty.Start makes the child a session leader (Setsid), so its process group id is its pid, like Setpgid.
	f, err := pty.StartWithSize(cmd, size)
	if err != nil {
		return err
	}
	p.ptyFile = f
	p.stdin = f
	if len(spec.Stdin) > 0 {
		go func() { _, _ = f.Write(spec.Stdin) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(p.stdout, f) // ends with EIO once every holder of the terminal has closed it
	}()
	go func() {
		<-p.done
		select {
		case <-copied:
		case <-time.After(waitDelay):
		}
		f.Close()
	}()
	go p.wait(cmd, copied)
	return nil
}

// wait reaps the process, records how it ended and closes the output rings.
func (p *Process) wait(cmd *exec.Cmd, ptyCopied <-chan struct{}) {
	err := cmd.Wait()
	if ptyCopied != nil {
		select {
		case <-ptyCopied:
		case <-time.After(cmd.WaitDelay):
		}
	}
	p.mu.Lock()
	code, sig := -1, ""
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = signalName(ws.Signal())
			code = 128 + int(ws.Signal())
		} else {
			code = st.ExitCode()
		}
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState == nil {
		sig = "" // never reaped (should not happen after a successful Start): report -1
	}
	p.exitCode = &code
	p.signal = sig
	p.status = agentapi.StatusExited
	if p.reason != "" {
		p.status = p.reason
	}
	p.ended = time.Now()
	if p.stdin != nil && p.ptyFile == nil {
		p.stdin.Close()
	}
	p.stdin = nil
	reason := p.reason
	p.mu.Unlock()
	if reason != "" {
		// stragglers that ignored SIGTERM (the leader is gone, its group may not be)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	p.stdout.Close()
	p.stderr.Close()
	close(p.done)
	p.onEnd()
}

// Done is closed once the process has been reaped and its output is complete.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stdout and Stderr are the output rings.
func (p *Process) Stdout() *ring.Ring { return p.stdout }
func (p *Process) Stderr() *ring.Ring { return p.stderr }

// Stream returns the ring of a stream name.
func (p *Process) Stream(name string) *ring.Ring {
	if name == agentapi.StreamStderr {
		return p.stderr
	}
	return p.stdout
}

// Started is when the process started.
func (p *Process) Started() time.Time { return p.started }

func (p *Process) endedAt() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended, !p.ended.IsZero()
}

// State is a snapshot of a process without output.
type State struct {
	Status   string
	ExitCode *int
	Signal   string
	Ended    time.Time
}

// State returns the current state.
func (p *Process) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return State{Status: p.status, ExitCode: p.exitCode, Signal: p.signal, Ended: p.ended}
}

// WriteStdin writes data to the process's standard input and closes it when eof is set.
func (p *Process) WriteStdin(ctx context.Context, data []byte, eof bool) error {
	p.mu.Lock()
	w := p.stdin
	isPTY := p.ptyFile != nil
	p.mu.Unlock()
	if w == nil {
		return agentapi.Errorf(agentapi.CodeConflict, "process %s has no open standard input (start it with keep_stdin, or it has ended)", p.ID)
	}
	if len(data) > 0 {
		errc := make(chan error, 1)
		go func() { _, err := w.Write(data); errc <- err }()
		select {
		case err := <-errc:
			if err != nil {
				return agentapi.Errorf(agentapi.CodeConflict, "writing to standard input of %s: %v", p.ID, err)
			}
		case <-ctx.Done():
			return agentapi.Errorf(agentapi.CodeTimeout, "writing to standard input of %s: the process is not reading", p.ID)
		}
	}
	if eof {
		if isPTY {
			_, err := w.Write([]byte{4}) // ^D: the terminal's end of input
			return err
		}
		p.mu.Lock()
		if p.stdin != nil {
			p.stdin.Close()
			p.stdin = nil
		}
		p.mu.Unlock()
	}
	return nil
}

// Signal sends sig to the process's group; on a terminal, to its foreground group (the job a shell is running,
// as ^C would).
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return agentapi.Errorf(agentapi.CodeConflict, "process %s has ended", p.ID)
	default:
	}
	pgid := p.PID
	p.mu.Lock()
	if p.ptyFile != nil {
		if fg, err := unix.IoctlGetInt(int(p.ptyFile.Fd()), unix.TIOCGPGRP); err == nil && fg > 0 {
			pgid = fg
		}
	}
	p.mu.Unlock()
	if err := syscall.Kill(-pgid, sig); err != nil {
		return fmt.Errorf("signalling process group %d: %w", pgid, err)
	}
	return nil
}

// Resize changes the terminal size of a PTY process.
func (p *Process) Resize(cols, rows uint16) error {
	p.mu.Lock()
	f := p.ptyFile
	p.mu.Unlock()
	if f == nil {
		return agentapi.Errorf(agentapi.CodeConflict, "process %s has no terminal", p.ID)
	}
	return pty.Setsize(f, &pty.Winsize{Cols: cols, Rows: rows})
}

// Kill ends the process group (SIGTERM, then SIGKILL after the grace period) and marks it killed.
func (p *Process) Kill() { p.terminate(agentapi.StatusKilled) }

func (p *Process) terminate(reason string) {
	p.mu.Lock()
	if !p.ended.IsZero() || p.reason != "" {
		p.mu.Unlock()
		return
	}
	p.reason = reason
	p.mu.Unlock()
	// An interactive shell ignores SIGTERM but ends on a hang-up, as when a terminal closes.
	first := syscall.SIGTERM
	if p.PTY {
		first = syscall.SIGHUP
	}
	_ = syscall.Kill(-p.PID, first)
	go func() {
		select {
		case <-p.done:
		case <-time.After(p.killGrace):
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		}
	}()
}

// lookPath finds argv0 on the PATH of the process's own environment.
func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range strings.Split(pathVar, ":") {
		if dir == "" {
			dir = "."
		}
		full := dir + "/" + argv0
		if fi, err := os.Stat(full); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return full, nil
		}
	}
	return "", agentapi.Errorf(agentapi.CodeInvalidRequest, "%s: command not found", argv0)
}
