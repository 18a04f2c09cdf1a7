package fastgpt

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	testSandboxID = "app-0123456789abcdef"
	testSessionID = "abcdefghijABCDEFGHIJ0123"
)

// previewAgent serves files like the IDE agent's preview server, recording what it was sent.
func previewAgent(t *testing.T, token string, got chan *http.Request) *fakeAgent {
	ag := newFakeAgent(t, token)
	ag.preview = func(w http.ResponseWriter, r *http.Request) {
		got <- r
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("X-Secret-Internal", "leak")
		w.Header().Set("Set-Cookie", "a=b")
		body := "hello preview"
		if r.Header.Get("Range") == "bytes=0-4" {
			w.Header().Set("Content-Range", "bytes 0-4/13")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			if r.Header.Get("X-Fastgpt-Preview-Method") != "HEAD" {
				_, _ = w.Write([]byte(body[:5]))
			}
			return
		}
		w.Header().Set("Content-Length", "13")
		if r.Header.Get("X-Fastgpt-Preview-Method") != "HEAD" {
			_, _ = w.Write([]byte(body))
		}
	}
	return ag
}

func previewURL(e *env, path string) string {
	return e.srv.URL + "/preview/" + testSandboxID + "/" + testSessionID + "/" + path
}

func TestPreview(t *testing.T) {
	e := newEnv(t, nil)
	got := make(chan *http.Request, 10)
	ag := previewAgent(t, "preview-token", got)
	e.app.previews[testSandboxID+":"+testSessionID] = ag

	req, _ := http.NewRequest(http.MethodGet, previewURL(e, "dir%20a/r%C3%A9sum%C3%A9.txt"), nil)
	req.Header.Set("Range", "bytes=0-4")
	req.Header.Set("If-None-Match", `"v0"`)
	req.Header.Set("Cookie", "session=secret")
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || body != "hello" {
		t.Fatalf("range: %d %q", resp.StatusCode, body)
	}
	for k, v := range map[string]string{"Content-Range": "bytes 0-4/13", "Content-Length": "5", "ETag": `"v1"`,
		"Accept-Ranges": "bytes", "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "private, no-store",
		"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "X-Secret-Internal": "", "Set-Cookie": ""} {
		if resp.Header.Get(k) != v {
			t.Errorf("response %s = %q, want %q", k, resp.Header.Get(k), v)
		}
	}
	up := <-got
	if up.URL.EscapedPath() != "/preview/dir%20a/r%C3%A9sum%C3%A9.txt" || up.Method != http.MethodGet {
		t.Errorf("agent got %s %s", up.Method, up.URL.EscapedPath())
	}
	if up.Header.Get("X-Fastgpt-Agent-Token") != "preview-token" || up.Header.Get("If-None-Match") != `"v0"` ||
		up.Header.Get("Cookie") != "" || up.Header.Get("Authorization") != "" {
		t.Errorf("agent request headers: %v", up.Header)
	}

	// HEAD goes as GET with the method header; the second request comes from the cache.
	resp, err = http.Head(previewURL(e, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	up = <-got
	if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != "13" || up.Method != http.MethodGet ||
		up.Header.Get("X-Fastgpt-Preview-Method") != "HEAD" {
		t.Fatalf("HEAD: %d %v; agent %s %v", resp.StatusCode, resp.Header, up.Method, up.Header)
	}
	if n := e.app.verifyN.Load(); n != 1 {
		t.Fatalf("%d verifyTicket calls for two previews, want 1 (cached)", n)
	}
	h := <-e.app.headers
	if h.Get("X-Sandbox-Preview-Session") != testSandboxID+":"+testSessionID || h.Get("X-Proxy-Token") != testSecret {
		t.Fatalf("verifyTicket headers %v", h)
	}
}

func TestPreviewErrors(t *testing.T) {
	e := newEnv(t, nil)
	got := make(chan *http.Request, 10)
	ag := previewAgent(t, "preview-token", got)
	e.app.previews[testSandboxID+":"+testSessionID] = ag
	for _, tc := range []struct {
		name, path string
		status     int
		body       string
	}{
		{"bad sandbox id", "/preview/app-XYZ/" + testSessionID + "/a.txt", 401, "Unauthorized preview session"},
		{"skilledit id ok but unknown", "/preview/skilledit-0123456789abcdef/" + testSessionID + "/a.txt", 403, "Preview session resolution failed"},
		{"bad session id", "/preview/" + testSandboxID + "/Abcdefghij0123456789ABCD/a.txt", 401, "Unauthorized preview session"},
		{"short session id", "/preview/" + testSandboxID + "/abc/a.txt", 401, "Unauthorized preview session"},
		{"unknown session", "/preview/" + testSandboxID + "/zzzzzzzzzzzzzzzzzzzzzzzz/a.txt", 403, "Preview session resolution failed"},
		{"empty path", "/preview/" + testSandboxID + "/" + testSessionID + "/", 400, "Invalid preview request"},
		{"absolute path", "/preview/" + testSandboxID + "/" + testSessionID + "//etc/passwd", 400, "Invalid preview request"},
		{"dot dot", "/preview/" + testSandboxID + "/" + testSessionID + "/a/../../b", 400, "Invalid preview request"},
		{"encoded dot dot", "/preview/" + testSandboxID + "/" + testSessionID + "/a/%2E%2E/b", 400, "Invalid preview request"},
		{"dot", "/preview/" + testSandboxID + "/" + testSessionID + "/./a", 400, "Invalid preview request"},
		{"backslash", "/preview/" + testSandboxID + "/" + testSessionID + "/a%5Cb", 400, "Invalid preview request"},
		{"nul", "/preview/" + testSandboxID + "/" + testSessionID + "/a%00b", 400, "Invalid preview request"},
		{"empty segment", "/preview/" + testSandboxID + "/" + testSessionID + "/a//b", 400, "Invalid preview request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if resp.Header.Get("Cache-Control") != "private, no-store" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("headers %v", resp.Header)
			}
		})
	}
}

// TestPreviewRetry: a stale cached address (agent answers 401 or is gone) is dropped, re-resolved and retried once;
// if the retry fails too the answer is 502.
func TestPreviewRetry(t *testing.T) {
	e := newEnv(t, nil)
	got := make(chan *http.Request, 10)
	good := previewAgent(t, "fresh-token", got)
	stale := newFakeAgent(t, "stale-token")
	var staleHits atomic.Int32
	stale.preview = func(w http.ResponseWriter, r *http.Request) {
		staleHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	key := testSandboxID + ":" + testSessionID
	e.app.previews[key] = stale
	get := func() (int, string) {
		resp, err := http.Get(previewURL(e, "a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, readAll(t, resp.Body)
	}
	// Both attempts reach the stale agent: 502.
	if st, body := get(); st != http.StatusBadGateway || body != "Sandbox preview is unavailable" {
		t.Fatalf("got %d %q", st, body)
	}
	if staleHits.Load() != 2 || e.app.verifyN.Load() != 2 {
		t.Fatalf("stale hits %d, verify calls %d; want 2, 2", staleHits.Load(), e.app.verifyN.Load())
	}
	// Cache the stale address, then move the session: the retry finds the fresh agent.
	e.app.mu.Lock()
	e.app.previews[key] = good
	e.app.mu.Unlock()
	e.proxy.cache.Add(cacheKey(key), &sandboxAddress{SandboxURL: stale.srv.URL, AgentToken: "stale-token"})
	if st, body := get(); st != 200 || body != "hello preview" {
		t.Fatalf("after re-resolve: %d %q", st, body)
	}
	// A vanished agent (connect error) is retried the same way.
	gone := newFakeAgent(t, "gone")
	gone.srv.Close()
	e.proxy.cache.Add(cacheKey(key), &sandboxAddress{SandboxURL: gone.srv.URL, AgentToken: "gone"})
	if st, _ := get(); st != 200 {
		t.Fatalf("after connect error: %d", st)
	}
}

func TestPreviewMethodsAndRoutes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Routes = RoutesWS })
	resp, err := http.Get(previewURL(e, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("preview on a ws-only proxy: %d", resp.StatusCode)
	}
	e2 := newEnv(t, func(c *Config) { c.Routes = RoutesPreview })
	resp, err = http.Get(e2.srv.URL + "/fs?ticket=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("fs on a preview-only proxy: %d", resp.StatusCode)
	}
	resp, err = http.Post(e2.srv.URL+"/preview/"+testSandboxID+"/"+testSessionID+"/a", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST preview: %d", resp.StatusCode)
	}
}
