package service

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// AgentGrace is added to an exec's own timeout for the agent round trip, so the agent's timeout fires first and
// the caller gets the command's partial result rather than a bare timeout.
const AgentGrace = 10 * time.Second

// ExecMeta is what a caller may attach to an execution in the history.
type ExecMeta struct {
	Description *string
	Tags        *string
}

// Kernel languages of RunKernel.
const (
	LangPython = "python"
	LangNode   = "node"
	LangR      = "r"
)

// KernelOutput is a finished kernel cell.
type KernelOutput struct {
	Success bool
	// Text is stdout, the cell's value and (for a successful cell) stderr, as python/exec's output.
	Text  string
	Error string
	// Images are base64 PNGs (python only).
	Images         []string
	ExecutionCount int
	ExecutionID    string
	Elapsed        time.Duration
	// Truncated is set when the output was cut (the kernel's cap, or the gateway's bound on agent replies).
	Truncated bool
}

// RunKernel runs code in the sandbox's persistent kernel of lang and records it in the history.
func (s *Service) RunKernel(ctx context.Context, p Principal, id, lang, code string, timeout time.Duration, meta ExecMeta) (KernelOutput, error) {
	var (
		capability string
		run        kernelRun
	)
	switch lang {
	case LangPython:
		capability, run = sandboxes.CapPython, s.cfg.Agent.Python
	case LangNode:
		capability = sandboxes.CapNode
		if agent, ok := s.cfg.Agent.(NodeAgent); ok {
			run = func(ctx context.Context, t sandboxes.Target, req PythonRequest) (PythonResult, error) {
				res, err := agent.Node(ctx, t, req)
				res.Images = nil // Node answers carry no images
				return res, err
			}
		}
	case LangR:
		capability = sandboxes.CapR
		if agent, ok := s.cfg.Agent.(RAgent); ok {
			run = agent.R
		}
	default:
		return KernelOutput{}, Errorf(CodeValidation, "unknown kernel language %q (python, node or r)", lang)
	}
	if run == nil {
		return KernelOutput{}, Errorf(CodeCapability, "this gateway's agent client does not run %s", lang).With("capability", capability).With("available", []string{})
	}
	t, err := s.Running(ctx, p, id, capability)
	if err != nil {
		return KernelOutput{}, err
	}
	s.injectSkills(ctx, id, t) // skills_inject.go
	ctx, cancel := context.WithTimeout(ctx, timeout+AgentGrace)
	defer cancel()
	start := time.Now()
	res, err := run(ctx, t, PythonRequest{Code: code, Timeout: timeout})
	elapsed := time.Since(start)
	if err != nil {
		return KernelOutput{}, s.lost(ctx, id, err)
	}
	text := res.Stdout
	if res.Result != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += res.Result
	}
	if res.Error == "" {
		// stderr of a successful cell (warnings) is output, as Jupyter shows it; it is not an error.
		text += res.Stderr
	}
	out := KernelOutput{
		Success: res.Error == "", Text: text, Error: res.Error, Images: res.Images, ExecutionCount: res.ExecutionCount, Elapsed: elapsed,
		Truncated: res.Truncated,
	}
	out.ExecutionID = s.Record(id, lang, code, out.Success, elapsed, text, res.Error, meta)
	return out, nil
}

// ShellParams is a shell command to run.
type ShellParams struct {
	Command string
	// Cwd is relative to the workspace root; nil or "" is the root.
	Cwd     *string
	Timeout time.Duration
}

// ShellOutput is a finished shell command.
type ShellOutput struct {
	Success bool
	// ExitCode is -1 when the command timed out.
	ExitCode    int
	Stdout      string
	Error       string
	TimedOut    bool
	ExecutionID string
	Elapsed     time.Duration
	// Truncated is set when the output was cut (the agent's ring, or the gateway's bound on agent replies).
	Truncated bool
}

// RunShell runs a shell command to its end (or its timeout) and records it in the history.
func (s *Service) RunShell(ctx context.Context, p Principal, id string, sp ShellParams, meta ExecMeta) (ShellOutput, error) {
	req := ExecRequest{Command: sp.Command, Timeout: sp.Timeout}
	t, err := s.shellTarget(ctx, id, p, sp.Cwd, &req.Cwd)
	if err != nil {
		return ShellOutput{}, err
	}
	s.injectSkills(ctx, id, t) // skills_inject.go
	ctx, cancel := context.WithTimeout(ctx, req.Timeout+AgentGrace)
	defer cancel()
	start := time.Now()
	res, err := s.cfg.Agent.Exec(ctx, t, req)
	elapsed := time.Since(start)
	if err != nil {
		return ShellOutput{}, s.lost(ctx, id, err)
	}
	exit := res.ExitCode
	errText := res.Stderr
	if res.TimedOut {
		exit = -1
		errText = strings.TrimRight("Command timed out\n"+res.Stderr, "\n")
	}
	out := ShellOutput{Success: exit == 0 && !res.TimedOut, ExitCode: exit, Stdout: res.Stdout, Error: errText,
		TimedOut: res.TimedOut, Elapsed: elapsed, Truncated: res.Truncated}
	out.ExecutionID = s.Record(id, "shell", sp.Command, out.Success, elapsed, res.Stdout, errText, meta)
	return out, nil
}

// StreamShell starts a shell command and returns the agent's SSE stream of its events.
func (s *Service) StreamShell(ctx context.Context, p Principal, id string, sp ShellParams) (io.ReadCloser, error) {
	if err := s.CanStream(); err != nil {
		return nil, err
	}
	req := ExecRequest{Command: sp.Command, Timeout: sp.Timeout}
	t, err := s.shellTarget(ctx, id, p, sp.Cwd, &req.Cwd)
	if err != nil {
		return nil, err
	}
	return s.cfg.Streamer.ExecStream(ctx, t, req)
}

// shellTarget is the running sandbox a shell command (exec, exec stream, PTY) goes to, once the command's working
// directory, when given, is checked and cleaned into *dst.
func (s *Service) shellTarget(ctx context.Context, id string, p Principal, cwd *string, dst *string) (sandboxes.Target, error) {
	if cwd != nil && *cwd != "" {
		c, err := CleanWorkspacePath("cwd", *cwd, true)
		if err != nil {
			return sandboxes.Target{}, err
		}
		*dst = c
	}
	return s.Running(ctx, p, id, sandboxes.CapShell)
}

// Record stores an execution in the history; a failure to record is logged, never fails the call.
func (s *Service) Record(sandboxID, execType, code string, success bool, elapsed time.Duration, output, errText string, m ExecMeta) string {
	e := &sandboxes.HistoryEntry{
		ID: NewID("exec-"), SandboxID: sandboxID, ExecType: execType, Code: code, Success: success,
		ExecutionTimeMS: elapsed.Milliseconds(), Output: strPtr(output), Error: EmptyToNil(errText),
		Description: m.Description, Tags: m.Tags, CreatedAt: s.cfg.Now().UTC(),
	}
	if s.cfg.History == nil {
		return e.ID
	}
	if err := s.cfg.History.AddHistory(e); err != nil { // queued; stored in the background
		s.cfg.Logger.Warn("recording execution history", "sandbox", sandboxID, "error", err)
	}
	return e.ID
}

// agentLossChecker is the Manager's CheckAgentLoss (sandboxes/deaths.go); optional, so fakes need not have it.
type agentLossChecker interface {
	CheckAgentLoss(ctx context.Context, id string) error
}

// lost turns an exec's failed agent call into the sandbox's death when that is what it was: a transport failure
// (not an answer of the agent) on a sandbox whose container is gone answers the Manager's typed, retryable
// session_not_ready (or container_died past the crash limit) and starts the rebuild, instead of a bare ship_error.
// The check runs after the caller's own deadline too (bounded): the death is recorded either way.
func (s *Service) lost(ctx context.Context, id string, err error) error {
	var ae *agentapi.Error
	if errors.As(err, &ae) || AsError(err).Code != CodeShipError {
		return err
	}
	c, ok := s.cfg.Sandboxes.(agentLossChecker)
	if !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if derr := c.CheckAgentLoss(ctx, id); derr != nil {
		return derr
	}
	return err
}
