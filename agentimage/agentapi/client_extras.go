package agentapi

import (
	"context"
	"net/http"
)

// Client calls for the Python and Node.js kernels and the browser helpers. A cell that raises is a result with
// Success false, not an error; any non-2xx answer is the agent's typed *Error.

// PythonExec runs a cell on the sandbox's persistent Python kernel (POST /v1/python/exec).
func (c *Client) PythonExec(ctx context.Context, r KernelExecRequest) (KernelExecResult, error) {
	var res KernelExecResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/python/exec", r, &res)
}

// RExec runs code in the sandbox's persistent R session (POST /v1/r/exec).
func (c *Client) RExec(ctx context.Context, r KernelExecRequest) (KernelExecResult, error) {
	var res KernelExecResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/r/exec", r, &res)
}

// NodeExec runs code on the sandbox's persistent Node.js kernel (POST /v1/node/exec).
func (c *Client) NodeExec(ctx context.Context, r KernelExecRequest) (KernelExecResult, error) {
	var res KernelExecResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/node/exec", r, &res)
}

// BrowserNavigate loads a URL in the helpers' persistent page and waits for its load event.
func (c *Client) BrowserNavigate(ctx context.Context, r BrowserNavigateRequest) (BrowserNavigateResult, error) {
	var res BrowserNavigateResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/browser/navigate", r, &res)
}

// BrowserScreenshot captures the persistent page as PNG (base64 in the result).
func (c *Client) BrowserScreenshot(ctx context.Context, r BrowserScreenshotRequest) (BrowserScreenshotResult, error) {
	var res BrowserScreenshotResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/browser/screenshot", r, &res)
}

// BrowserEvaluate evaluates JavaScript in the persistent page and returns its JSON value.
func (c *Client) BrowserEvaluate(ctx context.Context, r BrowserEvaluateRequest) (BrowserEvaluateResult, error) {
	var res BrowserEvaluateResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/browser/evaluate", r, &res)
}

// BrowserText returns the persistent page's URL, title and innerText.
func (c *Client) BrowserText(ctx context.Context) (BrowserTextResult, error) {
	var res BrowserTextResult
	return res, c.doJSON(ctx, http.MethodPost, "/v1/browser/text", nil, &res)
}

// BrowserInfo returns the CDP endpoint (as the agent sees the caller), Chromium's version and targets.
func (c *Client) BrowserInfo(ctx context.Context) (BrowserInfo, error) {
	var res BrowserInfo
	return res, c.doJSON(ctx, http.MethodGet, "/v1/browser/info", nil, &res)
}
