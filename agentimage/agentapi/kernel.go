package agentapi

// Python kernel errors. A cell that raises is not an HTTP error (it answers 200 with success=false); these are for a
// kernel that could not run the cell at all.
const (
	// CodeKernelDied (HTTP 500): the kernel process exited or was killed while running the cell; its variables are gone. The
	// next call starts a fresh kernel.
	CodeKernelDied = "kernel_died"
)

// KernelExecRequest is the body of POST /v1/python/exec and POST /v1/node/exec: both kernels take the same request.
type KernelExecRequest struct {
	Code string `json:"code"`
	// TimeoutMS bounds the cell. Python: when it passes the cell is interrupted (KeyboardInterrupt) and the kernel
	// keeps its state; 0 means 60 s, at most 1 h. Node: 0 means 30 s, at most 300 s.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// KernelError is an exception a cell raised: Python's ename, evalue and traceback; for Node, the JavaScript error's
// name, message and its stack's lines.
type KernelError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// KernelExecResult is the answer of POST /v1/python/exec and POST /v1/node/exec: one shape for both kernels.
type KernelExecResult struct {
	// Success is false when the cell raised (including an interrupt after a timeout).
	Success bool   `json:"success"`
	Stdout  string `json:"stdout"`
	Stderr  string `json:"stderr"`
	// Result is the cell's trailing expression, absent when there is none: Python's repr() (absent for None); Node's
	// util.inspect() (a returned Promise awaited; absent for undefined).
	Result *string      `json:"result,omitempty"`
	Error  *KernelError `json:"error,omitempty"`
	// Images are the matplotlib figures the cell left open, as base64 PNG; they are closed afterwards. Node's stay
	// empty.
	Images []string `json:"images"`
	// ExecutionCount numbers the cells this kernel ran, from 1.
	ExecutionCount int   `json:"execution_count"`
	DurationMS     int64 `json:"duration_ms"`
	// TimedOut is true when the cell was interrupted because timeout_ms passed.
	TimedOut bool `json:"timed_out,omitempty"`
	// KernelRestarted is true when the previous kernel had died (or, for Node, had to be killed) and this cell ran on
	// a fresh one: every variable is gone.
	KernelRestarted bool `json:"kernel_restarted,omitempty"`
	// OutputTruncated is true when stdout or stderr went over the per-cell cap and was cut.
	OutputTruncated bool `json:"output_truncated,omitempty"`
}

// The endpoints' own names for the shared kernel types.
type (
	PythonExecRequest = KernelExecRequest
	PythonExecResult  = KernelExecResult
	PythonError       = KernelError
	NodeExecRequest   = KernelExecRequest
	NodeExecResult    = KernelExecResult
)

// PythonRestartResult is the answer of POST /v1/python/restart.
type PythonRestartResult struct {
	Restarted bool `json:"restarted"`
	// PythonVersion is the kernel's sys.version.
	PythonVersion string `json:"python_version"`
}
