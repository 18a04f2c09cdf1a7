package agentapi

import (
	"encoding/json"
	"net/http"
)

// Headers the browser and proxy routes honour.
const (
	// CDPFilterHeader switches on a CDP relay filter; "browser_close" answers Browser.close itself (the query
	// parameter filter=browser_close does the same) so a client's browser.close() leaves the shared browser running.
	CDPFilterHeader = "X-Sandgate-CDP-Filter"
	// CDPFilterBrowserClose is the one filter there is.
	CDPFilterBrowserClose = "browser_close"
	// WSMaxMessageHeader caps the size of one WebSocket message (bytes) on the agent's WebSocket routes; a larger
	// message closes the connection with 1009.
	WSMaxMessageHeader = "X-Sandgate-WS-Max-Message"
)

// Browser and proxy error codes.
const (
	// CodeUpstreamUnavailable: nothing answers on the sandbox port /proxy was asked for (HTTP 502).
	CodeUpstreamUnavailable = "upstream_unavailable"
	// CodePortNotAllowed: the port is the agent's own, or a browser port that has its own route (HTTP 403).
	CodePortNotAllowed = "port_not_allowed"
	// CodeBrowserError: Chromium answered a REST helper with an error, or the page threw (HTTP 422).
	CodeBrowserError = "browser_error"
)

// StatusOf the codes above, for building *Error values with HTTPStatus set.
const (
	UpstreamUnavailableStatus = http.StatusBadGateway
	PortNotAllowedStatus      = http.StatusForbidden
	BrowserErrorStatus        = http.StatusUnprocessableEntity
)

// BrowserNavigateRequest is the body of POST /v1/browser/navigate.
type BrowserNavigateRequest struct {
	URL string `json:"url"`
	// TimeoutMS bounds waiting for the load event; default 30 s.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// BrowserNavigateResult is the answer of POST /v1/browser/navigate.
type BrowserNavigateResult struct {
	URL      string `json:"url"`
	Title    string `json:"title"`
	TargetID string `json:"target_id"`
}

// BrowserScreenshotRequest is the body of POST /v1/browser/screenshot.
type BrowserScreenshotRequest struct {
	FullPage bool `json:"full_page,omitempty"`
}

// BrowserScreenshotResult is the answer of POST /v1/browser/screenshot.
type BrowserScreenshotResult struct {
	// Data is the PNG, base64.
	Data   string `json:"data"`
	Format string `json:"format"`
}

// BrowserEvaluateRequest is the body of POST /v1/browser/evaluate.
type BrowserEvaluateRequest struct {
	// Expression is JavaScript evaluated in the page; a promise is awaited.
	Expression string `json:"expression"`
}

// BrowserEvaluateResult is the answer of POST /v1/browser/evaluate.
type BrowserEvaluateResult struct {
	// Value is the expression's value as JSON (null for undefined or values that do not serialise).
	Value json.RawMessage `json:"value"`
}

// BrowserTextResult is the answer of POST /v1/browser/text.
type BrowserTextResult struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	// Text is document.body.innerText.
	Text string `json:"text"`
}

// BrowserInfo is the answer of GET /v1/browser/info.
type BrowserInfo struct {
	// CDPURL is the HTTP endpoint a CDP client connects to (Playwright's connectOverCDP, Puppeteer's browserURL).
	CDPURL string `json:"cdp_url"`
	// WebSocketURL is the browser target's WebSocket, as rewritten for the caller.
	WebSocketURL string `json:"websocket_url"`
	// Version is Chromium's /json/version (URLs rewritten).
	Version map[string]any `json:"version"`
	// Targets is Chromium's /json/list (URLs rewritten).
	Targets []map[string]any `json:"targets"`
	// PageTargetID is the page the REST helpers drive, when it exists.
	PageTargetID string `json:"page_target_id,omitempty"`
	// VNC is true when a VNC server is supervised (WS /vnc/websockify).
	VNC bool `json:"vnc"`
}
