// Package linekernel runs a persistent interpreter process, the Node and R kernels, that reads one request line and
// answers one result line over two extra pipes (fd 3 in, fd 4 out), so user output never mixes with results. What
// the kernels share lives here: lazy start and restart, one cell at a time, the deadline past which a cell that the
// interpreter cannot stop costs the process (its whole process group is killed and the next call starts a fresh
// one, which the result says), streaming a cell's output while it runs (ExecStream), and POST /v1/<kernel>/exec.
// What differs, the program and its line format, is a Spec.
package linekernel

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Spec is what one kind of kernel is.
type Spec struct {
	// Name is how errors call the process ("the node kernel", "the R session"); LogName how the log does.
	Name, LogName string
	// Missing is returned, as is, when the binary is not on PATH.
	Missing error
	// Args follow the binary; Program is fed on stdin.
	Args    []string
	Program string
	// Ready reports whether the first result line says the program is ready.
	Ready func(line string) bool
	// DefaultTimeout is a cell's timeout when the caller gives none, MaxTimeout the most it may ask for; zero
	// means the package's DefaultTimeout and MaxTimeout.
	DefaultTimeout, MaxTimeout time.Duration
	// Grace is how long past its own timeout the kernel may take to answer before it is presumed blocked;
	// StartTimeout bounds starting the binary and loading the program.
	Grace, StartTimeout time.Duration
	// MaxLine bounds one result line.
	MaxLine int
	// Encode is the request line for a cell (without its newline); stream asks the program for Output lines.
	Encode func(id, code string, timeout time.Duration, stream bool) ([]byte, error)
	// Output, when set, recognises a line of output the program sends while a cell runs (asked for by Encode's
	// stream): the id of the request, "stdout" or "stderr", and the text. Other lines go to Decode.
	Output func(line string) (id, stream, text string, ok bool)
	// TeeStdout gives the program a pipe as fd 5, onto which it copies its cell's stdout as printed (R's split
	// sink). The bytes are the cell's result's stdout as they are written, so the agent streams them and knows,
	// by counting, which bytes the result still owes the stream and which late ones to drop.
	TeeStdout bool
	// Decode reads a result line: the result and the id of the request it answers. elapsed is the time since the
	// request was sent, for kernels that do not measure it themselves.
	Decode func(line string, elapsed time.Duration) (agentapi.KernelExecResult, string, error)
	// Blocked is the message of a cell that outlasted its timeout and Grace: why the process had to go.
	Blocked func(timeout time.Duration) string
}

// The limits of one cell the Node and R kernels share (docs/customise.md).
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 300 * time.Second
)

// Config says where and how one kernel runs.
type Config struct {
	// Bin is the binary, looked up on PATH.
	Bin string
	// Dir is the working directory; default the current directory.
	Dir string
	// Env is the kernel's environment; nil means the agent's.
	Env    []string
	Logger *slog.Logger
}

// Kernel is a lazily started, restartable interpreter process. Executions are serialised: a kernel runs one cell
// at a time.
type Kernel struct {
	spec Spec
	cfg  Config
	mu   sync.Mutex // held for a whole execution
	p    *process
	seq  int
}

// New returns a kernel that starts on its first execution.
func New(spec Spec, cfg Config) *Kernel {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if spec.DefaultTimeout == 0 {
		spec.DefaultTimeout = DefaultTimeout
	}
	if spec.MaxTimeout == 0 {
		spec.MaxTimeout = MaxTimeout
	}
	return &Kernel{spec: spec, cfg: cfg}
}

type process struct {
	cmd     *exec.Cmd
	req     *os.File
	results chan string // lines from fd 4; closed when the process exits
	exited  chan struct{}
	tee     *tee // fd 5 with Spec.TeeStdout, else nil
}

// Output receives a running cell's output as the kernel prints it: stream is "stdout" or "stderr". It must not
// block for long: the kernel waits for it.
type Output func(stream string, p []byte)

// Exec runs code in the kernel. A timeout of 0 means the Spec's default. The returned error is for the agent
// failing (the binary missing, the kernel not starting); an error in user code is a result with Success false.
func (k *Kernel) Exec(ctx context.Context, code string, timeout time.Duration) (agentapi.KernelExecResult, error) {
	return k.exec(ctx, code, timeout, nil)
}

// ExecStream is Exec with the cell's output handed to out as the kernel prints it. Everything of the result's
// Stdout and Stderr has gone to out when it returns (what the kernel did not stream goes at the end), so the
// caller does not send them again.
func (k *Kernel) ExecStream(ctx context.Context, code string, timeout time.Duration, out Output) (agentapi.KernelExecResult, error) {
	return k.exec(ctx, code, timeout, out)
}

func (k *Kernel) exec(ctx context.Context, code string, timeout time.Duration, out Output) (agentapi.KernelExecResult, error) {
	if timeout <= 0 {
		timeout = k.spec.DefaultTimeout
	}
	timeout = min(timeout, k.spec.MaxTimeout)
	k.mu.Lock()
	defer k.mu.Unlock()
	restarted := false
	if k.p != nil {
		select {
		case <-k.p.exited: // died between calls (an exit in a timer, an OOM kill)
			k.stop()
			restarted = true
		default:
		}
	}
	if k.p == nil {
		if err := k.start(ctx); err != nil {
			return agentapi.KernelExecResult{}, err
		}
	}
	k.seq++
	id := "x" + strconv.Itoa(k.seq)
	line, err := k.spec.Encode(id, code, timeout, out != nil && k.spec.Output != nil)
	if err != nil {
		return agentapi.KernelExecResult{}, fmt.Errorf("encoding the request: %w", err)
	}
	p := k.p
	// sent counts, per stream, the bytes out received, so the result's text past them goes at the end.
	sent := map[string]int{}
	if p.tee != nil {
		p.tee.begin(out)
	}
	if _, err := p.req.Write(append(line, '\n')); err != nil {
		k.stop()
		return agentapi.KernelExecResult{}, fmt.Errorf("sending code to %s: %w", k.spec.Name, err)
	}
	// The wait ignores ctx on purpose: a client going away must not leave a half-run cell whose result would be
	// read as the next cell's. The deadline bounds it.
	deadline := time.NewTimer(timeout + k.spec.Grace)
	defer deadline.Stop()
	started := time.Now()
	for {
		select {
		case l, ok := <-p.results:
			if !ok {
				code := p.cmd.ProcessState.ExitCode()
				k.stop()
				return finish(lost(fmt.Sprintf("%s exited (code %d) while running this code; it starts again on the next call and every variable is gone", k.spec.Name, code), started, false), out, sent), nil
			}
			if k.spec.Output != nil {
				if oid, stream, text, ok := k.spec.Output(l); ok {
					if oid == id && out != nil && text != "" {
						out(stream, []byte(text))
						sent[stream] += len(text)
					}
					continue
				}
			}
			res, rid, err := k.spec.Decode(l, time.Since(started))
			if err != nil || rid != id {
				k.cfg.Logger.Warn(k.spec.LogName+": unexpected line", "line", truncate(l, 200), "error", err)
				continue
			}
			if p.tee != nil {
				sent["stdout"] += p.tee.end(len(res.Stdout))
			}
			res.KernelRestarted = restarted
			return finish(res, out, sent), nil
		case <-deadline.C:
			k.stop()
			return finish(lost(k.spec.Blocked(timeout), started, true), out, sent), nil
		}
	}
}

// finish hands out what of the result's output it has not had yet.
func finish(res agentapi.KernelExecResult, out Output, sent map[string]int) agentapi.KernelExecResult {
	if out == nil {
		return res
	}
	for _, s := range []struct{ name, text string }{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		if n := sent[s.name]; n < len(s.text) {
			out(s.name, []byte(s.text[n:]))
		}
	}
	return res
}

// lost is the result of an execution that cost the kernel its state.
func lost(msg string, started time.Time, timedOut bool) agentapi.KernelExecResult {
	return agentapi.KernelExecResult{
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
	bin, err := exec.LookPath(k.cfg.Bin)
	if err != nil {
		return k.spec.Missing
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the request pipe of %s: %w", k.spec.Name, err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return fmt.Errorf("creating the result pipe of %s: %w", k.spec.Name, err)
	}
	cmd := exec.Command(bin, k.spec.Args...)
	cmd.Dir = k.cfg.Dir
	cmd.Env = k.cfg.Env
	cmd.Stdin = strings.NewReader(k.spec.Program)
	cmd.Stdout = &logWriter{logger: k.cfg.Logger, name: k.spec.LogName, stream: "stdout"}
	cmd.Stderr = &logWriter{logger: k.cfg.Logger, name: k.spec.LogName, stream: "stderr"}
	cmd.ExtraFiles = []*os.File{reqR, resW}
	var teeR, teeW *os.File
	if k.spec.TeeStdout {
		if teeR, teeW, err = os.Pipe(); err != nil {
			reqR.Close()
			reqW.Close()
			resR.Close()
			resW.Close()
			return fmt.Errorf("creating the output pipe of %s: %w", k.spec.Name, err)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, teeW)
	}
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll(reqR, reqW, resR, resW, teeR, teeW)
		return fmt.Errorf("starting %s: %w", k.spec.Name, err)
	}
	closeAll(reqR, resW, teeW)
	p := &process{cmd: cmd, req: reqW, results: make(chan string, 4), exited: make(chan struct{})}
	if teeR != nil {
		p.tee = &tee{}
		go func() { p.tee.drain(teeR); teeR.Close() }()
	}
	go func() {
		sc := bufio.NewScanner(resR)
		sc.Buffer(make([]byte, 64<<10), k.spec.MaxLine)
		for sc.Scan() {
			p.results <- sc.Text()
		}
		resR.Close()
		_ = cmd.Wait()
		close(p.results)
		close(p.exited)
	}()
	k.p = p // from here on stop() ends it, whatever the start's outcome
	timer := time.NewTimer(k.spec.StartTimeout)
	defer timer.Stop()
	select {
	case l, ok := <-p.results:
		if ok && k.spec.Ready(l) {
			k.cfg.Logger.Info(k.spec.LogName+" started", "pid", cmd.Process.Pid, "ready", truncate(l, 200))
			return nil
		}
		k.stop()
		return fmt.Errorf("%s did not start (first line %q)", k.spec.Name, truncate(l, 200))
	case <-timer.C:
	case <-ctx.Done():
	}
	k.stop()
	return fmt.Errorf("%s did not become ready within %s", k.spec.Name, k.spec.StartTimeout)
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
		k.cfg.Logger.Warn(k.spec.LogName+" did not exit after SIGKILL", "pid", p.cmd.Process.Pid)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// logWriter sends the interpreter's own stdout/stderr (start-up failures, fatal errors; user output is captured
// inside) to the log.
type logWriter struct {
	logger       *slog.Logger
	name, stream string
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.logger.Warn(w.name+" output", "stream", w.stream, "text", truncate(string(b), 2000))
	return len(b), nil
}
