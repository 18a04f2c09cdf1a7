package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Routes is what Register needs from the agent's server.
type Routes interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds the CDP, VNC and browser helper routes. They answer not_supported when the capability is off.
func (b *Browser) Register(r Routes) {
	r.HandleFunc("GET /cdp/json", b.serveDiscovery)
	r.HandleFunc("GET /cdp/json/", b.serveDiscovery)
	r.HandleFunc("PUT /cdp/json/", b.serveDiscovery)
	r.HandleFunc("/cdp", b.serveDevtools)
	r.HandleFunc("/cdp/{$}", b.serveDevtools)
	r.HandleFunc("/cdp/devtools/", b.serveDevtools)
	r.HandleFunc("/vnc/websockify", b.serveVNC)
	r.HandleFunc("/vnc/ws", b.serveVNC)
	r.HandleFunc("GET /v1/browser/info", b.serveInfo)
	r.HandleFunc("POST /v1/browser/navigate", serveJSON(b.Navigate))
	r.HandleFunc("POST /v1/browser/screenshot", serveJSON(func(ctx context.Context, req agentapi.BrowserScreenshotRequest) (agentapi.BrowserScreenshotResult, error) {
		data, err := b.Screenshot(ctx, req.FullPage)
		return agentapi.BrowserScreenshotResult{Data: base64.StdEncoding.EncodeToString(data), Format: "png"}, err
	}))
	r.HandleFunc("POST /v1/browser/evaluate", serveJSON(func(ctx context.Context, req agentapi.BrowserEvaluateRequest) (agentapi.BrowserEvaluateResult, error) {
		v, err := b.Evaluate(ctx, req.Expression)
		return agentapi.BrowserEvaluateResult{Value: v}, err
	}))
	r.HandleFunc("POST /v1/browser/text", b.serveText)
}

// pageTarget is the one page the REST helpers drive. It is created on first use and kept, so navigate, then text,
// then screenshot all see the same page; if Chromium restarted or someone closed the tab, a new one is made.
type pageTarget struct {
	mu   sync.Mutex
	id   string
	sess *session
}

func (p *pageTarget) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil {
		p.sess.close()
		p.sess = nil
	}
}

// withPage runs fn on the persistent page, holding it for the duration (helpers are serialised).
func (b *Browser) withPage(ctx context.Context, fn func(s *session) error) error {
	if _, err := b.ready(ctx); err != nil {
		return err
	}
	p := &b.page
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil || !p.sess.alive() {
		if err := b.attachPage(ctx, p); err != nil {
			return err
		}
	}
	return fn(p.sess)
}

func (b *Browser) attachPage(ctx context.Context, p *pageTarget) error {
	var targets []map[string]any
	if err := b.getJSON(ctx, "/json/list", &targets); err != nil {
		return chromiumError("listing targets", err)
	}
	ws := ""
	for _, t := range targets {
		if t["id"] == p.id && p.id != "" {
			ws, _ = t["webSocketDebuggerUrl"].(string)
		}
	}
	if ws == "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, b.cdpBase()+"/json/new?about:blank", nil)
		if err != nil {
			return err
		}
		resp, err := b.http.Do(req)
		if err != nil {
			return chromiumError("opening a page", err)
		}
		defer resp.Body.Close()
		var t struct {
			ID  string `json:"id"`
			WS  string `json:"webSocketDebuggerUrl"`
			Err string
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &t) != nil || t.WS == "" {
			return chromiumError("opening a page", fmt.Errorf("chromium answered %s: %s", resp.Status, body))
		}
		p.id, ws = t.ID, t.WS
	}
	s, err := dialSession(ctx, ws)
	if err != nil {
		return chromiumError("attaching to the page", err)
	}
	if _, err := cdp.Call(ctx, s, page.Enable, page.EnableParams{}); err != nil {
		s.close()
		return chromiumError("enabling page events", err)
	}
	p.sess = s
	return nil
}

func chromiumError(doing string, err error) *agentapi.Error {
	e := agentapi.Errorf(agentapi.CodeUnavailable, "%s in chromium: %v", doing, err)
	e.Retryable = true
	return e
}

func browserError(format string, args ...any) *agentapi.Error {
	e := agentapi.Errorf(agentapi.CodeBrowserError, format, args...)
	e.HTTPStatus = agentapi.BrowserErrorStatus
	return e
}

// evaluate runs a JavaScript expression in the page and returns its JSON value; a throw is a browser_error.
func evaluate(ctx context.Context, s *session, expression string) (jsonv2.Value, error) {
	yes := true
	res, err := cdp.Call(ctx, s, runtime.Evaluate, runtime.EvaluateParams{
		Expression: expression, ReturnByValue: &yes, AwaitPromise: &yes, UserGesture: &yes,
	})
	if err != nil {
		return nil, browserError("evaluating: %v", err)
	}
	if d := res.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg = d.Exception.Description
		}
		return nil, browserError("the expression threw: %s", msg).With("line", d.LineNumber).With("column", d.ColumnNumber)
	}
	if res.Result == nil || len(res.Result.Value) == 0 {
		return jsonv2.Value("null"), nil
	}
	return res.Result.Value, nil
}

func evaluateString(ctx context.Context, s *session, expression string) (string, error) {
	v, err := evaluate(ctx, s, expression)
	if err != nil {
		return "", err
	}
	var out string
	_ = json.Unmarshal(v, &out)
	return out, nil
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeTooLarge, "request body is over 1 MiB"))
		return false
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "decoding request: %v", err))
		return false
	}
	return true
}

// Navigate loads a URL in the persistent page and waits for its load event (default 30 s).
func (b *Browser) Navigate(ctx context.Context, req agentapi.BrowserNavigateRequest) (agentapi.BrowserNavigateResult, error) {
	var out agentapi.BrowserNavigateResult
	u, err := url.Parse(req.URL)
	if err != nil || u.Scheme == "" {
		return out, agentapi.Errorf(agentapi.CodeInvalidRequest, "url %q is not an absolute URL", req.URL)
	}
	timeout := 30 * time.Second
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	err = b.withPage(ctx, func(s *session) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		loads, stop := s.Subscribe(page.LoadEventFired.Method)
		defer stop()
		res, err := cdp.Call(ctx, s, page.Navigate, page.NavigateParams{URL: req.URL})
		if err != nil {
			return browserError("navigating to %s: %v", req.URL, err)
		}
		if res.ErrorText != "" {
			return browserError("navigating to %s: %s", req.URL, res.ErrorText)
		}
		if res.LoaderID != "" { // a same-document navigation (a #fragment) fires no load event
			select {
			case <-loads:
			case <-s.done:
				return chromiumError("navigating", errors.New("the page went away"))
			case <-ctx.Done():
				e := agentapi.Errorf(agentapi.CodeTimeout, "the page did not finish loading within %s", timeout)
				e.Retryable = true
				return e
			}
		}
		out.TargetID = b.page.id
		if out.URL, err = evaluateString(ctx, s, "location.href"); err != nil {
			return err
		}
		out.Title, err = evaluateString(ctx, s, "document.title")
		return err
	})
	return out, err
}

// Screenshot captures the persistent page as PNG; fullPage captures the whole scrollable page.
func (b *Browser) Screenshot(ctx context.Context, fullPage bool) ([]byte, error) {
	var data []byte
	err := b.withPage(ctx, func(s *session) error {
		params := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng}
		if fullPage {
			m, err := cdp.Call(ctx, s, page.GetLayoutMetrics, cdp.Empty{})
			if err != nil {
				return browserError("measuring the page: %v", err)
			}
			if m.CSSContentSize != nil {
				yes := true
				params.CaptureBeyondViewport = &yes
				params.Clip = &page.Viewport{Width: math.Ceil(m.CSSContentSize.Width), Height: math.Ceil(m.CSSContentSize.Height), Scale: 1}
			}
		}
		res, err := cdp.Call(ctx, s, page.CaptureScreenshot, params)
		if err != nil {
			return browserError("taking a screenshot: %v", err)
		}
		data = res.Data
		return nil
	})
	return data, err
}

// Evaluate runs JavaScript in the persistent page (promises awaited) and returns its value as JSON.
func (b *Browser) Evaluate(ctx context.Context, expression string) (json.RawMessage, error) {
	if expression == "" {
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "expression is empty")
	}
	var v jsonv2.Value
	err := b.withPage(ctx, func(s *session) error {
		var err error
		v, err = evaluate(ctx, s, expression)
		return err
	})
	return json.RawMessage(v), err
}

// Text returns the persistent page's URL, title and document.body.innerText.
func (b *Browser) Text(ctx context.Context) (agentapi.BrowserTextResult, error) {
	var out agentapi.BrowserTextResult
	err := b.withPage(ctx, func(s *session) error {
		var err error
		if out.URL, err = evaluateString(ctx, s, "location.href"); err != nil {
			return err
		}
		if out.Title, err = evaluateString(ctx, s, "document.title"); err != nil {
			return err
		}
		out.Text, err = evaluateString(ctx, s, "document.body ? document.body.innerText : ''")
		return err
	})
	return out, err
}

// serveJSON is a helper route: the JSON body decoded into Req, do's answer as JSON or its typed error.
func serveJSON[Req, Res any](do func(context.Context, Req) (Res, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if !decodeBody(w, r, &req) {
			return
		}
		out, err := do(r.Context(), req)
		if err != nil {
			agentapi.WriteError(w, err)
			return
		}
		agentapi.WriteJSON(w, http.StatusOK, out)
	}
}

func (b *Browser) serveText(w http.ResponseWriter, r *http.Request) {
	out, err := b.Text(r.Context())
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, out)
}

func (b *Browser) serveInfo(w http.ResponseWriter, r *http.Request) {
	version, err := b.ready(r.Context())
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	var targets []map[string]any
	if err := b.getJSON(r.Context(), "/json/list", &targets); err != nil {
		agentapi.WriteError(w, chromiumError("listing targets", err))
		return
	}
	ext := externalFrom(r)
	ext.rewriteTargets(version)
	for _, t := range targets {
		ext.rewriteTargets(t)
	}
	if targets == nil {
		targets = []map[string]any{}
	}
	ws, _ := version["webSocketDebuggerUrl"].(string)
	b.page.mu.Lock()
	pageID := b.page.id
	b.page.mu.Unlock()
	agentapi.WriteJSON(w, http.StatusOK, agentapi.BrowserInfo{
		CDPURL: ext.httpURL(), WebSocketURL: ws, Version: version, Targets: targets, PageTargetID: pageID, VNC: b.vncEnabled(),
	})
}
