package caddymodule

import (
	"context"

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
	return cellResult(res.Stdout, res.Stderr, res.Result, res.Error, res.Success, res.KernelRestarted, res.ExecutionCount), nil
}

var _ bayapi.NodeAgent = (*agentBackend)(nil)
