// Package rkernel runs a persistent R session for POST /v1/r/exec, the third kernel beside Python and Node: one R
// process whose global environment survives between calls, base graphics and ggplot2 plots returned as PNG, and
// errors with R's message. The kernel program (kernel.R) is embedded and fed to Rscript on stdin; it speaks lines
// over two extra pipes (fd 3 in, fd 4 out) so user output never mixes with results, hex-encoded because base R has
// no JSON or base64. A cell's stdout is also copied to fd 5 as printed, which streams it (stderr comes with the
// result: R's message sink cannot be split). R's own time limit stops a cell at its timeout; a cell stuck where R
// cannot interrupt it (in C code) is handled by killing the process group and starting a fresh session, which the
// result says.
package rkernel

import (
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/linekernel"
)

//go:embed kernel.R
var program string

// ErrRMissing means the image has no R.
var ErrRMissing = errors.New("this sandbox image has no R (use the sandgate/sandbox:r image)")

// Config says how to start the kernel: Bin is the Rscript binary, default "Rscript" from PATH.
type Config = linekernel.Config

// Kernel is a lazily started, restartable R process. Executions are serialised.
type Kernel = linekernel.Kernel

// spec is kernel.R: tab-separated lines, hex-encoded (base R has no JSON or base64), and R's own time limit.
var spec = linekernel.Spec{
	Name:         "the R session",
	LogName:      "R kernel",
	Missing:      ErrRMissing,
	Args:         []string{"--no-save", "--no-restore", "--no-site-file", "--no-init-file", "-e", `source(file("stdin"))`},
	Program:      program,
	Ready:        func(l string) bool { return l == "ready" },
	Grace:        3 * time.Second,
	StartTimeout: 30 * time.Second,
	MaxLine:      64 << 20,
	// kernel.R copies a cell's stdout onto fd 5 as printed (a split sink), whether or not it is streamed.
	TeeStdout: true,
	Encode: func(id, code string, timeout time.Duration, _ bool) ([]byte, error) {
		return []byte(id + " " + strconv.FormatInt(timeout.Milliseconds(), 10) + " " + hex.EncodeToString([]byte(code))), nil
	},
	Decode: func(l string, elapsed time.Duration) (agentapi.KernelExecResult, string, error) {
		res, id, err := parseResult(l)
		res.DurationMS = elapsed.Milliseconds()
		return res, id, err
	},
	Blocked: func(timeout time.Duration) string {
		return fmt.Sprintf("execution timed out after %s and R did not stop it: the session was restarted and every variable is gone", timeout)
	},
}

// New returns a kernel that starts on its first execution.
func New(cfg Config) *Kernel {
	if cfg.Bin == "" {
		cfg.Bin = "Rscript"
	}
	return linekernel.New(spec, cfg)
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
