// Package nodekernel runs a persistent Node.js kernel for POST /v1/node/exec: one node process holding one vm
// context, so variables, functions and required modules survive between calls. The kernel program (kernel.js) is
// embedded; it speaks JSON lines over two extra pipes (fd 3 in, fd 4 out) so user output never mixes with results.
// A streamed request also gets the cell's output as it is printed, as output lines before the result.
//
// The kernel enforces the timeout itself for synchronous code (vm's timeout) and for awaited promises (a race).
// A synchronous loop inside an async continuation blocks Node's event loop where nothing inside can stop it: the
// agent then kills the process group and starts a fresh kernel, and says so in the result (kernel_restarted).
package nodekernel

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/linekernel"
)

//go:embed kernel.js
var program string

// ErrNodeMissing means the image has no node binary.
var ErrNodeMissing = errors.New("node is not installed in this sandbox image (use the sandgate/sandbox:node image)")

// Config says how to start the kernel: Bin is the node binary, default "node" from PATH; Dir is also the base
// for require().
type Config = linekernel.Config

// Kernel is a lazily started, restartable node process. Executions are serialised: a kernel runs one cell at a time.
type Kernel = linekernel.Kernel

// spec is kernel.js: JSON lines, and the timeout enforced inside for synchronous code (vm's timeout) and awaited
// promises (a race).
var spec = linekernel.Spec{
	Name:    "the node kernel",
	LogName: "node kernel",
	Missing: ErrNodeMissing,
	// The program comes on stdin ("-"); --expose-internals gives it Node's REPL transform for top-level await.
	Args:    []string{"--expose-internals", "-"},
	Program: program,
	Ready:   func(l string) bool { return strings.Contains(l, `"id":"ready"`) },
	// The kernel answers its own timeouts; 2 s past one it is presumed blocked.
	Grace:        2 * time.Second,
	StartTimeout: 15 * time.Second,
	MaxLine:      16 << 20,
	Encode: func(id, code string, timeout time.Duration, stream bool) ([]byte, error) {
		return json.Marshal(map[string]any{"id": id, "code": code, "timeout_ms": timeout.Milliseconds(), "stream": stream})
	},
	Output: func(l string) (id, stream, text string, ok bool) {
		var o wireOutput
		if json.Unmarshal([]byte(l), &o) != nil || (o.Stream != "stdout" && o.Stream != "stderr") {
			return "", "", "", false
		}
		return o.ID, o.Stream, o.Text, true
	},
	Decode: func(l string, _ time.Duration) (agentapi.KernelExecResult, string, error) {
		var r wireResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return agentapi.KernelExecResult{}, "", err
		}
		return r.result(), r.ID, nil
	},
	Blocked: func(timeout time.Duration) string {
		return fmt.Sprintf("execution timed out after %s and the kernel did not stop it (a synchronous loop in an async callback blocks Node's event loop): the kernel was restarted and every variable is gone", timeout)
	},
}

// New returns a kernel that starts on its first execution.
func New(cfg Config) *Kernel {
	if cfg.Bin == "" {
		cfg.Bin = "node"
	}
	return linekernel.New(spec, cfg)
}

// wireOutput is an output line of kernel.js: what a streamed cell printed.
type wireOutput struct {
	ID     string `json:"id"`
	Stream string `json:"stream"`
	Text   string `json:"text"`
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
