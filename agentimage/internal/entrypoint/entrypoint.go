// Package entrypoint runs the image's own entrypoint as the agent's supervised child when the gateway injects the
// agent into an image that is not ours (profile `inject_agent`, `entrypoint`, `cmd`). The container lives as long
// as that child: when it exits the agent exits with the child's status, so the engine's die event carries the
// child's exit code (or 128+signal) and the gateway reports it as the sandbox's crash reason, exactly as it
// reports a crash of the agent itself. The child's output goes to the agent's own stdout and stderr, i.e. to the
// container log.
package entrypoint

import (
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

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Arg is the agent's first argument in the injected form: `sandgate-agent supervise -- <argv...>`.
const Arg = agentapi.ArgSupervise

// ExitNotFound is the status when the entrypoint cannot be started at all (not found, not executable), the
// shell's own convention for a command it cannot find.
const ExitNotFound = 127

// ParseArgs reads the agent's arguments after the program name. ok is false when they are not the supervise
// form; argv may then be empty (an image with neither ENTRYPOINT nor CMD: the agent runs alone).
func ParseArgs(args []string) (argv []string, ok bool, err error) {
	if len(args) == 0 || args[0] != Arg {
		return nil, false, nil
	}
	rest := args[1:]
	if len(rest) == 0 {
		return nil, true, nil
	}
	if rest[0] != "--" {
		return nil, true, fmt.Errorf("supervise: want `supervise -- <command...>`, got %q", strings.Join(rest, " "))
	}
	argv = rest[1:]
	if len(argv) > 0 && argv[0] == "" {
		return nil, true, errors.New("supervise: the entrypoint's program is empty")
	}
	return argv, true, nil
}

// Status is what the agent knows about the child (GET /v1/info shows it).
type Status = agentapi.EntrypointStatus

// Child is one supervised entrypoint process.
type Child struct {
	argv           []string
	stdout, stderr io.Writer
	done           chan struct{}

	mu     sync.Mutex
	cmd    *exec.Cmd
	status Status
}

// New prepares the child; Start runs it. Output goes to stdout and stderr (the container log).
func New(argv []string, stdout, stderr io.Writer) *Child {
	return &Child{argv: argv, stdout: stdout, stderr: stderr, done: make(chan struct{}),
		status: Status{Argv: append([]string{}, argv...)}}
}

// Start runs the child in the agent's environment and working directory (the image's WORKDIR), in a process
// group of its own so a stop reaches everything it started. An error means it did not start; Done is then
// already closed and ExitCode is ExitNotFound.
func (c *Child) Start() error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = os.Environ()
	cmd.Stdin = nil // /dev/null: a container log has no terminal behind it
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		code := ExitNotFound
		c.mu.Lock()
		c.status.ExitCode, c.status.Error = &code, err.Error()
		c.mu.Unlock()
		close(c.done)
		return fmt.Errorf("starting the entrypoint %q: %w", c.argv[0], err)
	}
	c.mu.Lock()
	c.cmd = cmd
	c.status.PID, c.status.Running = cmd.Process.Pid, true
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		code := exitStatus(cmd.ProcessState, err)
		c.mu.Lock()
		c.status.Running, c.status.ExitCode = false, &code
		if err != nil {
			c.status.Error = err.Error()
		}
		c.mu.Unlock()
		close(c.done)
	}()
	return nil
}

// Done is closed once the child has exited (or failed to start).
func (c *Child) Done() <-chan struct{} { return c.done }

// Status reports the child's state.
func (c *Child) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Argv = append([]string{}, s.Argv...)
	return s
}

// ExitCode is the child's status once Done is closed: its exit code, or 128+signal when a signal ended it (the
// shell's convention, which the gateway reads as sigkill, sigsegv, sigterm).
func (c *Child) ExitCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.ExitCode == nil {
		return -1
	}
	return *c.status.ExitCode
}

// Stop sends SIGTERM to the child's process group and SIGKILL after grace (or when ctx ends), and waits for it.
func (c *Child) Stop(ctx context.Context, grace time.Duration) {
	c.mu.Lock()
	cmd := c.cmd
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return ExitNotFound
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
