package agentapi

// Python kernel errors. A cell that raises is not an HTTP error (it answers 200 with success=false); these are for a
// kernel that could not run the cell at all.
const (
	// CodeKernelDied (HTTP 500): the kernel process exited or was killed while running the cell; its variables are gone. The
	// next call starts a fresh kernel.
	CodeKernelDied = "kernel_died"
)

// PythonExecRequest is the body of POST /v1/python/exec.
type PythonExecRequest struct {
	Code string `json:"code"`
	// TimeoutMS bounds the cell; when it passes the cell is interrupted (KeyboardInterrupt) and the kernel keeps its
	// state. 0 means the default (60 s); at most 1 h.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// PythonError is an exception a cell raised.
type PythonError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// PythonExecResult is the answer of POST /v1/python/exec.
type PythonExecResult struct {
	// Success is false when the cell raised (including an interrupt after a timeout).
	Success bool   `json:"success"`
	Stdout  string `json:"stdout"`
	Stderr  string `json:"stderr"`
	// Result is the repr() of the cell's trailing expression, absent when there is none or it is None.
	Result *string      `json:"result,omitempty"`
	Error  *PythonError `json:"error,omitempty"`
	// Images are the matplotlib figures the cell left open, as base64 PNG; they are closed afterwards.
	Images []string `json:"images"`
	// ExecutionCount numbers the cells this kernel ran, from 1.
	ExecutionCount int   `json:"execution_count"`
	DurationMS     int64 `json:"duration_ms"`
	// TimedOut is true when the cell was interrupted because timeout_ms passed.
	TimedOut bool `json:"timed_out,omitempty"`
	// KernelRestarted is true when the previous kernel had died and this cell ran on a fresh one (state lost).
	KernelRestarted bool `json:"kernel_restarted,omitempty"`
	// OutputTruncated is true when stdout or stderr went over the per-cell cap and was cut.
	OutputTruncated bool `json:"output_truncated,omitempty"`
}

// PythonRestartResult is the answer of POST /v1/python/restart.
type PythonRestartResult struct {
	Restarted bool `json:"restarted"`
	// PythonVersion is the kernel's sys.version.
	PythonVersion string `json:"python_version"`
}
