// Package pykernel runs the sandbox's persistent Python kernel: one python3 process per agent, started on first use,
// running our small kernel program (kernel.py, embedded) and spoken to in JSON lines over two extra pipes. Cells are
// serialised; a timeout interrupts the cell with SIGINT and the kernel keeps its variables; a kernel that dies is
// replaced on the next call, which says so.
package pykernel

import (
	"bufio"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

//go:embed kernel.py
var kernelSource string

const (
	// DefaultTimeout bounds a cell when the request names none.
	DefaultTimeout = 60 * time.Second
	// MaxTimeout is the longest a cell may be given.
	MaxTimeout = time.Hour
	// DefaultMaxOutput caps each of stdout and stderr per cell.
	DefaultMaxOutput = 1 << 20

	startTimeout = 30 * time.Second
	// interruptGrace is how long a cell gets to unwind after each SIGINT before the kernel is killed.
	interruptGrace = 2 * time.Second
	// outputGrace is how long to wait for the end-of-cell markers after the reply (they are written first, so this
	// only matters when a cell closed its own stdout).
	outputGrace = 2 * time.Second
)

// Config tunes a Kernel.
type Config struct {
	// Python is the interpreter; default "python3" from PATH.
	Python string
	// Dir is the kernel's working directory (the workspace); empty means the agent's.
	Dir string
	// Env is the kernel's environment; nil means the agent's. MPLBACKEND and MPLCONFIGDIR are added.
	Env []string
	// MaxOutput caps stdout and stderr per cell; default DefaultMaxOutput.
	MaxOutput int
	Logger    *slog.Logger
}

// Kernel is the one persistent kernel. Its methods are safe for concurrent use; cells run one at a time.
type Kernel struct {
	cfg Config
	// turn serialises cells and restarts; a channel so that waiting for it honours the caller's context.
	turn chan struct{}

	// mu guards proc and lost. Cells hold turn for their whole run; mu is only held briefly, so Close can kill a
	// kernel in the middle of a cell.
	mu   sync.Mutex
	proc *process
	// lost is true when a kernel died since the last cell, so the next result reports the restart.
	lost bool
}

// New returns a kernel that starts on first use.
func New(cfg Config) *Kernel {
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	return &Kernel{cfg: cfg, turn: make(chan struct{}, 1)}
}

func (k *Kernel) acquire(ctx context.Context) error {
	select {
	case k.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return agentapi.Errorf(agentapi.CodeTimeout, "waiting for the previous cell: %v", ctx.Err())
	}
}

func (k *Kernel) release() { <-k.turn }

// Exec runs one cell. A cell that raises is a result with Success false; an error means the cell could not run or
// the kernel died running it (kernel_died, with whatever output it printed in Details).
func (k *Kernel) Exec(ctx context.Context, code string, timeout time.Duration) (*agentapi.PythonExecResult, error) {
	res, err := k.exec(ctx, code, timeout, nil)
	if err != nil {
		return nil, err
	}
	return res.PythonExecResult, nil
}

// StreamResult is a cell's result as ExecStream returns it: the plain result, and the rich representations of the
// cell's trailing value by MIME type (text/html from a DataFrame's _repr_html_, image/png base64, …), which the
// JSON API leaves out.
type StreamResult struct {
	*agentapi.PythonExecResult
	Formats map[string]any
}

// Output receives a running cell's output as the kernel prints it: stream is "stdout" or "stderr", and p may end in
// the middle of a UTF-8 character. It is called with the kernel's capture locked, so it must not block.
type Output func(stream string, p []byte)

// ExecStream runs one cell as Exec does, handing its output to out as it is printed (within the same per-cell
// limit); the result still holds the whole output.
func (k *Kernel) ExecStream(ctx context.Context, code string, timeout time.Duration, out Output) (*StreamResult, error) {
	return k.exec(ctx, code, timeout, out)
}

func (k *Kernel) exec(ctx context.Context, code string, timeout time.Duration, out Output) (*StreamResult, error) {
	switch {
	case timeout <= 0:
		timeout = DefaultTimeout
	case timeout > MaxTimeout:
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "timeout_ms is over the maximum of %d", MaxTimeout.Milliseconds())
	}
	if err := k.acquire(ctx); err != nil {
		return nil, err
	}
	defer k.release()

	p, restarted, err := k.current(ctx)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	res, err := p.run(ctx, code, timeout, out)
	if err != nil {
		var e *agentapi.Error
		if errors.As(err, &e) && e.Code == agentapi.CodeKernelDied {
			k.mu.Lock()
			if k.proc == p {
				k.proc, k.lost = nil, true
			}
			k.mu.Unlock()
		}
		return nil, err
	}
	res.DurationMS = time.Since(started).Milliseconds()
	res.KernelRestarted = restarted
	return res, nil
}

// current returns the running kernel, starting one if there is none; restarted reports that an earlier kernel died
// since the last cell. The caller holds the turn.
func (k *Kernel) current(ctx context.Context) (p *process, restarted bool, err error) {
	k.mu.Lock()
	p, lost := k.proc, k.lost
	k.mu.Unlock()
	if p != nil {
		return p, false, nil
	}
	if p, err = k.start(ctx); err != nil {
		return nil, false, err
	}
	k.mu.Lock()
	k.proc, k.lost = p, false
	k.mu.Unlock()
	return p, lost, nil
}

// Restart replaces the kernel with a fresh one (starting it if none runs) and returns its Python version.
func (k *Kernel) Restart(ctx context.Context) (*agentapi.PythonRestartResult, error) {
	if err := k.acquire(ctx); err != nil {
		return nil, err
	}
	defer k.release()
	k.stop()
	p, err := k.start(ctx)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.proc, k.lost = p, false
	k.mu.Unlock()
	return &agentapi.PythonRestartResult{Restarted: true, PythonVersion: p.version}, nil
}

// Close kills the kernel, also in the middle of a cell (which then answers kernel_died).
func (k *Kernel) Close() { k.stop() }

func (k *Kernel) stop() {
	k.mu.Lock()
	p := k.proc
	k.proc = nil
	k.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// process is one running kernel.
type process struct {
	cmd     *exec.Cmd
	reqs    *os.File
	replies chan kernelReply
	exited  chan struct{}
	waitErr error
	stdout  *capture
	stderr  *capture
	version string
	logger  *slog.Logger
	cells   uint64
}

type kernelReply struct {
	Ready          bool                  `json:"ready"`
	Python         string                `json:"python"`
	ID             uint64                `json:"id"`
	OK             bool                  `json:"ok"`
	Result         *string               `json:"result"`
	Error          *agentapi.PythonError `json:"error"`
	Images         []string              `json:"images"`
	Formats        map[string]any        `json:"formats"`
	ExecutionCount int                   `json:"execution_count"`
}

type kernelRequest struct {
	ID     uint64 `json:"id"`
	Code   string `json:"code"`
	Marker string `json:"marker"`
}

func (k *Kernel) start(ctx context.Context) (*process, error) {
	python, err := exec.LookPath(k.cfg.Python)
	if err != nil {
		return nil, agentapi.Errorf(agentapi.CodeNotSupported, "python is not available in this sandbox (%s not found)", k.cfg.Python)
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating kernel request pipe: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		closeAll(reqR, reqW)
		return nil, fmt.Errorf("creating kernel reply pipe: %w", err)
	}
	cmd := exec.Command(python, "-u", "-c", kernelSource)
	cmd.Dir = k.cfg.Dir
	cmd.Env = append(append([]string{}, k.cfg.Env...), "MPLBACKEND=Agg", "MPLCONFIGDIR="+matplotlibConfigDir(k.cfg.Env))
	cmd.ExtraFiles = []*os.File{reqR, repW} // fd 3 and fd 4 in the kernel
	// Its own process group, so killing the kernel also kills what its cells started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Plain pipes rather than StdoutPipe: Wait must not wait for a grandchild that escaped the process group and
	// still holds the kernel's stdout.
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(reqR, reqW, repR, repW)
		return nil, fmt.Errorf("creating kernel stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(reqR, reqW, repR, repW, outR, outW)
		return nil, fmt.Errorf("creating kernel stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(reqR, reqW, repR, repW, outR, outW, errR, errW)
		return nil, fmt.Errorf("starting python kernel: %w", err)
	}
	closeAll(reqR, repW, outW, errW)
	p := &process{
		cmd: cmd, reqs: reqW, replies: make(chan kernelReply, 1), exited: make(chan struct{}),
		stdout: newCapture(k.cfg.MaxOutput), stderr: newCapture(k.cfg.MaxOutput), logger: k.cfg.Logger,
	}
	go func() { p.stdout.drain(outR); outR.Close() }()
	go func() { p.stderr.drain(errR); errR.Close() }()
	go p.readReplies(repR)
	go func() {
		p.waitErr = cmd.Wait()
		reqW.Close()
		close(p.exited)
	}()

	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case r, ok := <-p.replies:
		if ok && r.Ready {
			p.version = r.Python
			k.cfg.Logger.Info("python kernel started", "pid", cmd.Process.Pid)
			p.stderr.take(0) // start-up noise is nobody's cell output
			p.stdout.take(0)
			return p, nil
		}
	case <-t.C:
	case <-ctx.Done():
	}
	p.kill()
	p.stderr.expect(nil)
	out, _ := p.stderr.take(outputGrace / 4)
	return nil, agentapi.Errorf(agentapi.CodeKernelDied, "the python kernel did not start").With("stderr", out)
}

func (p *process) readReplies(r io.ReadCloser) {
	defer r.Close()
	defer close(p.replies)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // figures travel base64 in the reply
	for sc.Scan() {
		var rep kernelReply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			p.logger.Warn("python kernel: unreadable reply", "error", err)
			continue
		}
		p.replies <- rep
	}
}

func (p *process) run(ctx context.Context, code string, timeout time.Duration, out Output) (*StreamResult, error) {
	p.cells++ // run is only called with the kernel's turn held
	id := p.cells
	marker := newMarker()
	p.stdout.expect([]byte(marker))
	p.stderr.expect([]byte(marker))
	if out != nil {
		p.stdout.setSink(func(b []byte) { out("stdout", b) })
		p.stderr.setSink(func(b []byte) { out("stderr", b) })
		defer p.stdout.setSink(nil)
		defer p.stderr.setSink(nil)
	}
	line, err := json.Marshal(kernelRequest{ID: id, Code: code, Marker: marker})
	if err != nil {
		return nil, fmt.Errorf("encoding cell: %w", err)
	}
	if _, err := p.reqs.Write(append(line, '\n')); err != nil {
		return nil, p.died("the kernel stopped reading")
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	timedOut := false
	var rep kernelReply
	var ok bool
	select {
	case rep, ok = <-p.replies:
	case <-timer.C:
		timedOut = true
		rep, ok = p.interrupt()
	case <-ctx.Done(): // the caller left: stop the cell so the next one finds the kernel idle
		rep, ok = p.interrupt()
	}
	if !ok {
		if timedOut {
			return nil, p.died(fmt.Sprintf("the cell did not stop after an interrupt at its %s timeout; the kernel was killed", timeout))
		}
		return nil, p.died("the python kernel exited while running the cell")
	}
	stdout, truncOut := p.stdout.take(outputGrace)
	stderr, truncErr := p.stderr.take(outputGrace)
	res := &agentapi.PythonExecResult{
		Success: rep.OK, Stdout: stdout, Stderr: stderr, Result: rep.Result, Error: rep.Error,
		Images: rep.Images, ExecutionCount: rep.ExecutionCount, TimedOut: timedOut,
		OutputTruncated: truncOut || truncErr,
	}
	if res.Images == nil {
		res.Images = []string{}
	}
	return &StreamResult{PythonExecResult: res, Formats: rep.Formats}, nil
}

// interrupt sends SIGINT (twice if needed) and waits for the cell's reply; false when the kernel had to be killed
// or died.
func (p *process) interrupt() (kernelReply, bool) {
	for range 2 {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		t := time.NewTimer(interruptGrace)
		select {
		case rep, ok := <-p.replies:
			t.Stop()
			return rep, ok
		case <-t.C:
		}
	}
	p.kill()
	return kernelReply{}, false
}

// died builds the kernel_died error once the process is gone, with what the cell printed.
func (p *process) died(why string) error {
	p.kill()
	// The pipes end with the process; give the readers a moment to reach that end.
	stdout, _ := p.stdout.take(outputGrace / 4)
	stderr, _ := p.stderr.take(outputGrace / 4)
	e := agentapi.Errorf(agentapi.CodeKernelDied, "%s; its variables are lost and the next call starts a fresh kernel", why).
		With("stdout", stdout).With("stderr", stderr)
	var exit *exec.ExitError
	if errors.As(p.waitErr, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.With("signal", ws.Signal().String())
		} else {
			e.With("exit_code", exit.ExitCode())
		}
	} else if p.waitErr == nil {
		e.With("exit_code", 0)
	}
	return e
}

// kill ends the kernel's process group and waits for it to be reaped.
func (p *process) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func newMarker() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "\x1e<sandgate-cell-end-" + hex.EncodeToString(b) + ">\x1e"
}

// matplotlibConfigDir picks a writable place for matplotlib's cache: the root filesystem is read-only.
func matplotlibConfigDir(env []string) string {
	home := ""
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "HOME=" {
			home = kv[5:]
		}
	}
	for _, dir := range []string{filepath.Join(home, ".cache", "matplotlib"), filepath.Join(os.TempDir(), "sandgate-matplotlib")} {
		if home == "" && dir[0] != '/' {
			continue
		}
		if os.MkdirAll(dir, 0o700) == nil {
			return dir
		}
	}
	return os.TempDir()
}
