package caddymodule

import (
	"context"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// Node runs code in the sandbox's Node.js kernel; the agent answers in python/exec's shape.
func (a *agentBackend) Node(ctx context.Context, t sandboxes.Target, req bayapi.PythonRequest) (bayapi.PythonResult, error) {
	res, err := a.client(t).NodeExec(ctx, agentapi.KernelExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return bayapi.PythonResult{}, agentErr("running node", err)
	}
	return kernelResult(res), nil
}

var _ bayapi.NodeAgent = (*agentBackend)(nil)

// R runs code in the sandbox's R session; the agent answers in python/exec's shape.
func (a *agentBackend) R(ctx context.Context, t sandboxes.Target, req bayapi.PythonRequest) (bayapi.PythonResult, error) {
	res, err := a.client(t).RExec(ctx, agentapi.KernelExecRequest{Code: req.Code, TimeoutMS: req.Timeout.Milliseconds()})
	if err != nil {
		return bayapi.PythonResult{}, agentErr("running R", err)
	}
	return kernelResult(res), nil
}

var _ bayapi.RAgent = (*agentBackend)(nil)
