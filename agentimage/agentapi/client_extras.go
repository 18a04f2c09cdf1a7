package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client calls for the Python kernel and the browser helpers. They are plain functions over an *http.Client so they
// stand on their own; each takes the agent's base URL ("http://10.0.0.5:7777") and token, and returns the agent's
// typed *Error for any non-2xx answer. A Python cell that raises is a result with Success false, not an error.

// PythonExec runs a cell on the sandbox's persistent kernel (POST /v1/python/exec).
func PythonExec(ctx context.Context, hc *http.Client, baseURL, token string, r PythonExecRequest) (PythonExecResult, error) {
	var res PythonExecResult
	return res, callAgent(ctx, hc, baseURL, token, http.MethodPost, "/v1/python/exec", r, &res)
}

// PythonRestart replaces the kernel with a fresh one (POST /v1/python/restart).
func PythonRestart(ctx context.Context, hc *http.Client, baseURL, token string) (PythonRestartResult, error) {
	var res PythonRestartResult
	return res, callAgent(ctx, hc, baseURL, token, http.MethodPost, "/v1/python/restart", nil, &res)
}

// BrowserNavigateTo loads a URL in the helpers' persistent page and waits for its load event.
func BrowserNavigateTo(ctx context.Context, hc *http.Client, baseURL, token string, r BrowserNavigateRequest) (BrowserNavigateResult, error) {
	var res BrowserNavigateResult
	return res, callAgent(ctx, hc, baseURL, token, http.MethodPost, "/v1/browser/navigate", r, &res)
}

// BrowserScreenshotOf captures the persistent page as PNG (base64 in the result).
func BrowserScreenshotOf(ctx context.Context, hc *http.Client, baseURL, token string, r BrowserScreenshotRequest) (BrowserScreenshotResult, error) {
	var res BrowserScreenshotResult
	return res, callAgent(ctx, hc, baseURL, token, http.MethodPost, "/v1/browser/screenshot", r, &res)
}

// BrowserEvaluateIn evaluates JavaScript in the persistent page and returns its JSON value.
func BrowserEvaluateIn(ctx context.Context, hc *http.Client, baseURL, token string, r BrowserEvaluateRequest) (BrowserEvaluateResult, error) {
	var res BrowserEvaluateResult
	return res, callAgent(ctx, hc, baseURL, token, http.MethodPost, "/v1/browser/evaluate", r, &res)
}

// BrowserTextOf returns the persistent page's URL, title and innerText.
func BrowserTextOf(ctx context.Context, hc *http.Client, baseURL, token string) (BrowserTextResult, error) {
	var res BrowserTextResult
	return res, callAgent(ctx, hc, baseURL, token, http.MethodPost, "/v1/browser/text", nil, &res)
}

// GetBrowserInfo returns the CDP endpoint (as the agent sees the caller), Chromium's version and targets.
func GetBrowserInfo(ctx context.Context, hc *http.Client, baseURL, token string) (BrowserInfo, error) {
	var res BrowserInfo
	return res, callAgent(ctx, hc, baseURL, token, http.MethodGet, "/v1/browser/info", nil, &res)
}

func callAgent(ctx context.Context, hc *http.Client, baseURL, token, method, path string, in, out any) error {
	if hc == nil {
		hc = http.DefaultClient
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s body: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(baseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("building %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ReadError(resp, raw)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding %s reply: %w", path, err)
	}
	return nil
}
