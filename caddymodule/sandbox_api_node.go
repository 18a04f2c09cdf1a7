package caddymodule

import (
	"context"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// Node runs code in the sandbox's Node.js kernel; the agent answers in python/exec's shape.
func (a *agentBackend) Node(ctx context.Context, t sandboxes.Target, req bayapi.PythonRequest) (bayapi.PythonResult, error) {
	var res agentapi.NodeExecResult
	err := a.postJSON(ctx, t, "/v1/node/exec", agentapi.NodeExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()}, &res)
	if err != nil {
		return bayapi.PythonResult{}, agentErr("running node", err)
	}
	out := bayapi.PythonResult{Stdout: res.Stdout, Stderr: res.Stderr, ExecutionCount: res.ExecutionCount}
	if res.Result != nil {
		out.Result = *res.Result
	}
	switch {
	case res.Error != nil:
		out.Error = strings.Join(res.Error.Traceback, "\n")
		if out.Error == "" {
			out.Error = res.Error.EName + ": " + res.Error.EValue
		}
	case !res.Success:
		out.Error = "the cell failed"
	}
	if res.KernelRestarted {
		out.Stderr = "[kernel restarted: earlier variables are gone]\n" + out.Stderr
	}
	return out, nil
}

var _ bayapi.NodeAgent = (*agentBackend)(nil)
