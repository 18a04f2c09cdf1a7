// Package rkernel runs a persistent R session for POST /v1/r/exec, the third kernel beside Python and Node: one R
// process whose global environment survives between calls, base graphics and ggplot2 plots returned as PNG, and
// errors with R's message. The kernel program (kernel.R) is embedded and fed to Rscript on stdin; it speaks lines
// over two extra pipes (fd 3 in, fd 4 out) so user output never mixes with results, hex-encoded because base R has
// no JSON or base64. R's own time limit stops a cell at its timeout; a cell stuck where R cannot interrupt it (in C
// code) is handled by killing the process group and starting a fresh session, which the result says.
package rkernel

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
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

//go:embed kernel.R
var program string

// Limits of one execution.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 300 * time.Second
	grace          = 3 * time.Second
	startTimeout   = 30 * time.Second
	maxCodeBytes   = 4 << 20
)

// ErrRMissing means the image has no R.
var ErrRMissing = errors.New("this sandbox image has no R (use the sandgate/sandbox:r image)")

// Config says how to start the kernel.
type Config struct {
	// Rscript is the Rscript binary; default "Rscript" from PATH.
	Rscript string
	// Dir is the working directory; default the current directory.
	Dir    string
	Env    []string
	Logger *slog.Logger
}

// Kernel is a lazily started, restartable R process. Executions are serialised.
type Kernel struct {
	cfg Config
	mu  sync.Mutex
	p   *process
	seq int
}

type process struct {
	cmd     *exec.Cmd
	req     *os.File
	results chan string
	exited  chan struct{}
}

// New returns a kernel that starts on its first execution.
func New(cfg Config) *Kernel {
	if cfg.Rscript == "" {
		cfg.Rscript = "Rscript"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Kernel{cfg: cfg}
}

// Exec runs code in the session. A timeout of 0 means DefaultTimeout. The error is for the agent failing (R
// missing, the session not starting); an R error is a result with Success false.
func (k *Kernel) Exec(ctx context.Context, code string, timeout time.Duration) (agentapi.KernelExecResult, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timeout = min(timeout, MaxTimeout)
	k.mu.Lock()
	defer k.mu.Unlock()
	restarted := false
	if k.p != nil {
		select {
		case <-k.p.exited:
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
	p := k.p
	line := id + " " + strconv.FormatInt(timeout.Milliseconds(), 10) + " " + hex.EncodeToString([]byte(code)) + "\n"
	if _, err := p.req.WriteString(line); err != nil {
		k.stop()
		return agentapi.KernelExecResult{}, fmt.Errorf("sending code to the R session: %w", err)
	}
	// The wait ignores ctx on purpose (as the other kernels): an abandoned cell must not answer the next one.
	deadline := time.NewTimer(timeout + grace)
	defer deadline.Stop()
	started := time.Now()
	for {
		select {
		case l, ok := <-p.results:
			if !ok {
				code := p.cmd.ProcessState.ExitCode()
				k.stop()
				return lost(fmt.Sprintf("the R session exited (code %d) while running this code; it starts again on the next call and every variable is gone", code), started, false), nil
			}
			res, rid, err := parseResult(l)
			if err != nil || rid != id {
				k.cfg.Logger.Warn("R kernel: unexpected line", "line", truncate(l, 200), "error", err)
				continue
			}
			res.DurationMS = time.Since(started).Milliseconds()
			res.KernelRestarted = restarted
			return res, nil
		case <-deadline.C:
			k.stop()
			return lost(fmt.Sprintf("execution timed out after %s and R did not stop it: the session was restarted and every variable is gone", timeout), started, true), nil
		}
	}
}

// parseResult reads one result line of kernel.R.
func parseResult(l string) (agentapi.KernelExecResult, string, error) {
	f := strings.Split(l, "\t")
	if len(f) != 8 {
		return agentapi.KernelExecResult{}, "", fmt.Errorf("%d fields", len(f))
	}
	dec := func(s string) (string, error) {
		b, err := hex.DecodeString(s)
		return string(b), err
	}
	res := agentapi.KernelExecResult{Success: f[1] == "1", TimedOut: f[3] == "1", Images: []string{}}
	var err error
	if res.ExecutionCount, err = strconv.Atoi(f[2]); err != nil {
		return res, "", err
	}
	if res.Stdout, err = dec(f[4]); err != nil {
		return res, "", err
	}
	if res.Stderr, err = dec(f[5]); err != nil {
		return res, "", err
	}
	msg, err := dec(f[6])
	if err != nil {
		return res, "", err
	}
	if !res.Success {
		res.Error = &agentapi.KernelError{EName: "RError", EValue: msg, Traceback: []string{msg}}
	}
	if f[7] != "" {
		for _, h := range strings.Split(f[7], ",") {
			b, err := hex.DecodeString(h)
			if err != nil {
				return res, "", err
			}
			res.Images = append(res.Images, base64.StdEncoding.EncodeToString(b))
		}
	}
	return res, f[0], nil
}

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

// Close stops the R process.
func (k *Kernel) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stop()
}

func (k *Kernel) start(ctx context.Context) error {
	bin, err := exec.LookPath(k.cfg.Rscript)
	if err != nil {
		return ErrRMissing
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the R session's request pipe: %w", err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return fmt.Errorf("creating the R session's result pipe: %w", err)
	}
	cmd := exec.Command(bin, "--no-save", "--no-restore", "--no-site-file", "--no-init-file", "-e", `source(file("stdin"))`)
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
		return fmt.Errorf("starting R: %w", err)
	}
	reqR.Close()
	resW.Close()
	p := &process{cmd: cmd, req: reqW, results: make(chan string, 4), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(resR)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
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
	k.p = p
	select {
	case l, ok := <-p.results:
		if ok && l == "ready" {
			k.cfg.Logger.Info("R kernel started", "pid", cmd.Process.Pid)
			return nil
		}
		k.stop()
		return fmt.Errorf("the R session did not start (first line %q)", truncate(l, 200))
	case <-timer.C:
	case <-ctx.Done():
	}
	k.stop()
	return fmt.Errorf("the R session did not become ready within %s", startTimeout)
}

// stop kills the session's process group and waits for it.
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
	go func() {
		for range p.results {
		}
	}()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		k.cfg.Logger.Warn("R kernel did not exit after SIGKILL", "pid", p.cmd.Process.Pid)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// logWriter sends R's own stdout/stderr (start-up failures; user output is captured inside) to the log.
type logWriter struct {
	logger *slog.Logger
	stream string
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.logger.Warn("R kernel output", "stream", w.stream, "text", truncate(string(b), 2000))
	return len(b), nil
}
