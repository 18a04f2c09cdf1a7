// Package nodekernel runs a persistent Node.js kernel for POST /v1/node/exec: one node process holding one vm
// context, so variables, functions and required modules survive between calls. The kernel program (kernel.js) is
// embedded; it speaks JSON lines over two extra pipes (fd 3 in, fd 4 out) so user output never mixes with results.
//
// The kernel enforces the timeout itself for synchronous code (vm's timeout) and for awaited promises (a race).
// A synchronous loop inside an async continuation blocks Node's event loop where nothing inside can stop it: the
// agent then kills the process group and starts a fresh kernel, and says so in the result (kernel_restarted).
package nodekernel

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

//go:embed kernel.js
var program string

// Limits of one execution.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 300 * time.Second
	// grace is how long past its own timeout the kernel may take to answer before it is presumed blocked.
	grace = 2 * time.Second
	// startTimeout bounds starting node and loading the kernel program.
	startTimeout = 15 * time.Second
)

// ErrNodeMissing means the image has no node binary.
var ErrNodeMissing = errors.New("node is not installed in this sandbox image (use the sandgate/sandbox:node image)")

// Config says how to start the kernel.
type Config struct {
	// Node is the node binary; default "node" from PATH.
	Node string
	// Dir is the working directory and the base for require(); default the current directory.
	Dir string
	// Env is the kernel's environment; nil means the agent's.
	Env    []string
	Logger *slog.Logger
}

// Kernel is a lazily started, restartable node process. Executions are serialised: a kernel runs one cell at a time.
type Kernel struct {
	cfg Config
	mu  sync.Mutex // held for a whole execution
	p   *process
	seq int
}

// New returns a kernel that starts on its first execution.
func New(cfg Config) *Kernel {
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Kernel{cfg: cfg}
}

type process struct {
	cmd     *exec.Cmd
	req     *os.File
	results chan string // lines from fd 4; closed when the kernel exits
	exited  chan struct{}
}

// wireResult is a result line of kernel.js.
type wireResult struct {
	ID              string  `json:"id"`
	Success         bool    `json:"success"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	Result          *string `json:"result"`
	ExecutionCount  int     `json:"execution_count"`
	DurationMS      int64   `json:"execution_time_ms"`
	TimedOut        bool    `json:"timed_out"`
	OutputTruncated bool    `json:"output_truncated"`
	Error           *struct {
		Name    string `json:"name"`
		Message string `json:"message"`
		Stack   string `json:"stack"`
	} `json:"error"`
}

func (r wireResult) result() agentapi.NodeExecResult {
	res := agentapi.NodeExecResult{Success: r.Success, Stdout: r.Stdout, Stderr: r.Stderr, Result: r.Result, Images: []string{},
		ExecutionCount: r.ExecutionCount, DurationMS: r.DurationMS, TimedOut: r.TimedOut, OutputTruncated: r.OutputTruncated}
	if r.Error != nil {
		res.Error = &agentapi.KernelError{EName: r.Error.Name, EValue: r.Error.Message, Traceback: strings.Split(r.Error.Stack, "\n")}
	}
	return res
}

// Exec runs code in the kernel. A timeout of 0 means DefaultTimeout. The returned error is for the agent failing
// (node missing, kernel not starting); exceptions in user code are a result with Success false.
func (k *Kernel) Exec(ctx context.Context, code string, timeout time.Duration) (agentapi.NodeExecResult, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if timeout > MaxTimeout {
		timeout = MaxTimeout
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	restarted := false
	if k.p != nil {
		select {
		case <-k.p.exited: // died between calls (process.exit in a timer, OOM kill)
			k.stop()
			restarted = true
		default:
		}
	}
	if k.p == nil {
		if err := k.start(ctx); err != nil {
			return agentapi.NodeExecResult{}, err
		}
	}
	k.seq++
	id := fmt.Sprintf("x%d", k.seq)
	line, err := json.Marshal(map[string]any{"id": id, "code": code, "timeout_ms": timeout.Milliseconds()})
	if err != nil {
		return agentapi.NodeExecResult{}, fmt.Errorf("encoding the request: %w", err)
	}
	p := k.p
	if _, err := p.req.Write(append(line, '\n')); err != nil {
		k.stop()
		return agentapi.NodeExecResult{}, fmt.Errorf("sending code to the node kernel: %w", err)
	}
	// The wait ignores ctx on purpose: a client going away must not leave a half-run cell whose result would be
	// read as the next cell's. The deadline bounds it.
	deadline := time.NewTimer(timeout + grace)
	defer deadline.Stop()
	started := time.Now()
	for {
		select {
		case l, ok := <-p.results:
			if !ok {
				code := p.cmd.ProcessState.ExitCode()
				k.stop()
				return k.lost(fmt.Sprintf("the node kernel exited (code %d) while running this code; it starts again on the next call and every variable is gone", code), started, false), nil
			}
			var r wireResult
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.ID != id {
				k.cfg.Logger.Warn("node kernel: unexpected line", "line", truncate(l, 200))
				continue
			}
			res := r.result()
			res.KernelRestarted = restarted
			return res, nil
		case <-deadline.C:
			k.stop()
			return k.lost(fmt.Sprintf("execution timed out after %s and the kernel did not stop it (a synchronous loop in an async callback blocks Node's event loop): the kernel was restarted and every variable is gone", timeout), started, true), nil
		}
	}
}

// lost is the result of an execution that cost the kernel its state.
func (k *Kernel) lost(msg string, started time.Time, timedOut bool) agentapi.NodeExecResult {
	return agentapi.NodeExecResult{
		Error:           &agentapi.KernelError{EName: "KernelError", EValue: msg, Traceback: []string{msg}},
		Stderr:          msg + "\n",
		Images:          []string{},
		DurationMS:      time.Since(started).Milliseconds(),
		TimedOut:        timedOut,
		KernelRestarted: true,
	}
}

// Restart stops the kernel; the next execution starts a fresh one.
func (k *Kernel) Restart() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stop()
}

// Close stops the kernel process.
func (k *Kernel) Close() { k.Restart() }

func (k *Kernel) start(ctx context.Context) error {
	bin, err := exec.LookPath(k.cfg.Node)
	if err != nil {
		return ErrNodeMissing
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the kernel's request pipe: %w", err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return fmt.Errorf("creating the kernel's result pipe: %w", err)
	}
	// The program comes on stdin ("-"); --expose-internals gives it Node's REPL transform for top-level await.
	cmd := exec.Command(bin, "--expose-internals", "-")
	cmd.Dir = k.cfg.Dir
	cmd.Env = k.cfg.Env
	cmd.Stdin = strings.NewReader(program)
	cmd.Stdout = &logWriter{logger: k.cfg.Logger, stream: "stdout"}
	cmd.Stderr = &logWriter{logger: k.cfg.Logger, stream: "stderr"}
	cmd.ExtraFiles = []*os.File{reqR, resW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		reqR.Close()
		reqW.Close()
		resR.Close()
		resW.Close()
		return fmt.Errorf("starting node: %w", err)
	}
	reqR.Close()
	resW.Close()
	p := &process{cmd: cmd, req: reqW, results: make(chan string, 4), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(resR)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			p.results <- sc.Text()
		}
		resR.Close()
		_ = cmd.Wait()
		close(p.results)
		close(p.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case l, ok := <-p.results:
		if ok && strings.Contains(l, `"id":"ready"`) {
			k.p = p
			k.cfg.Logger.Info("node kernel started", "pid", cmd.Process.Pid, "ready", l)
			return nil
		}
		k.p = p
		k.stop()
		return fmt.Errorf("the node kernel did not start (first line %q)", truncate(l, 200))
	case <-timer.C:
	case <-ctx.Done():
	}
	k.p = p
	k.stop()
	return fmt.Errorf("the node kernel did not become ready within %s", startTimeout)
}

// stop kills the kernel's whole process group (children it spawned too) and waits for it.
func (k *Kernel) stop() {
	p := k.p
	if p == nil {
		return
	}
	k.p = nil
	p.req.Close()
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	// Drain so the reader goroutine can finish.
	go func() {
		for range p.results {
		}
	}()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		k.cfg.Logger.Warn("node kernel did not exit after SIGKILL", "pid", p.cmd.Process.Pid)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// logWriter sends the kernel's own stdout/stderr (V8 fatal errors; user output is captured inside) to the log.
type logWriter struct {
	logger *slog.Logger
	stream string
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.logger.Warn("node kernel output", "stream", w.stream, "text", truncate(string(b), 2000))
	return len(b), nil
}

var _ io.Writer = (*logWriter)(nil)
