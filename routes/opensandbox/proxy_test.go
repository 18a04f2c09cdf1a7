package opensandbox

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func (rg *rig) endpoint(id string, port string) Endpoint {
	rg.t.Helper()
	resp, m := rg.do("GET", "/v1/sandboxes/"+id+"/endpoints/"+port+"?use_server_proxy=true", keyAlice, "")
	if resp.StatusCode != 200 {
		rg.t.Fatalf("endpoint: %d %v", resp.StatusCode, m)
	}
	ep := Endpoint{Endpoint: m["endpoint"].(string), Headers: map[string]string{}}
	for k, v := range m["headers"].(map[string]any) {
		ep.Headers[k] = v.(string)
	}
	return ep
}

func (rg *rig) raw(method, url string, hdr map[string]string) (int, string) {
	rg.t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rg.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyForwardsWithTheSandboxesKeyOnly(t *testing.T) {
	rg := newRig(t)
	id := rg.create(keyAlice, fastGPTBody)
	ep := rg.endpoint(id, "44772")
	host := strings.TrimPrefix(rg.srv.URL, "http://")
	if !strings.HasPrefix(ep.Endpoint, host+"/sandboxes/"+id+".") || !strings.HasSuffix(ep.Endpoint, "/proxy/44772") {
		t.Fatalf("endpoint %q", ep.Endpoint)
	}
	// The URL alone is enough (FastGPT keeps only the URL), and execd's port maps onto the agent's /execd/.
	code, body := rg.raw("GET", "http://"+ep.Endpoint+"/ping?x=1", map[string]string{APIKeyHeader: keyAlice, "X-Sandgate-Token": "forged"})
	if code != 200 || body != "agent:/execd/ping" {
		t.Fatalf("proxy: %d %q", code, body)
	}
	got := <-rg.agentC
	tg, err := rg.m.Hold(t.Context(), id) // the sandbox's own agent token, as the Manager hands it out
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get("X-Sandgate-Token") != tg.Token || got.Header.Get(APIKeyHeader) != "" || got.URL.RawQuery != "x=1" {
		t.Fatalf("agent saw token %q api key %q query %q", got.Header.Get("X-Sandgate-Token"), got.Header.Get(APIKeyHeader), got.URL.RawQuery)
	}
	// Another port goes to that port through the agent's port proxy; the key can come as a header instead.
	code, body = rg.raw("GET", rg.srv.URL+"/sandboxes/"+id+"/proxy/1318/fs", ep.Headers)
	if code != 200 || body != "agent:/proxy/1318/fs" {
		t.Fatalf("port proxy: %d %q", code, body)
	}
	req, _ := http.NewRequest("GET", "http://"+strings.Replace(ep.Endpoint, "/44772", "/3000", 1)+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") {
		t.Errorf("an app response on the shared origin has CSP %q", csp)
	}
	<-rg.agentC
	if got := <-rg.agentC; got.Header.Get(ProxyKeyHeader) != "" {
		t.Fatal("the proxy key reached the sandbox")
	}
	// The owner's API key works without a proxy key; so under /v1.
	code, body = rg.raw("POST", rg.srv.URL+"/v1/sandboxes/"+id+"/proxy/44772/command", map[string]string{APIKeyHeader: keyAlice})
	if code != 200 || body != "agent:/execd/command" {
		t.Fatalf("api key proxy: %d %q", code, body)
	}
	<-rg.agentC
}

// TestProxyAttacks: OpenSandbox leaves these paths open; here every way in without the owner's credential fails,
// and none reaches the agent.
func TestProxyAttacks(t *testing.T) {
	rg := newRig(t)
	id := rg.create(keyAlice, fastGPTBody)
	other := rg.create(keyBob, fastGPTBody)
	ep := rg.endpoint(id, "44772")
	key := ep.Headers[ProxyKeyHeader]
	base := rg.srv.URL
	tests := []struct {
		name   string
		url    string
		hdr    map[string]string
		status int
		code   string
	}{
		{"no key", base + "/sandboxes/" + id + "/proxy/44772/ping", nil, 401, CodeMissingAPIKey},
		{"bad api key", base + "/sandboxes/" + id + "/proxy/44772/ping", map[string]string{APIKeyHeader: "guess"}, 401, CodeInvalidAPIKey},
		{"other owner's key", base + "/sandboxes/" + id + "/proxy/44772/ping", map[string]string{APIKeyHeader: keyBob}, 404, CodeSandboxNotFound},
		{"wrong proxy key", base + "/sandboxes/" + id + ".00000000000000000000000000000000/proxy/44772/ping", nil, 404, CodeSandboxNotFound},
		{"wrong proxy key with own api key", base + "/sandboxes/" + id + ".00/proxy/44772/ping", map[string]string{APIKeyHeader: keyAlice}, 404, CodeSandboxNotFound},
		{"key of another sandbox", base + "/sandboxes/" + other + "." + key + "/proxy/44772/ping", nil, 404, CodeSandboxNotFound},
		{"key header of another sandbox", base + "/sandboxes/" + other + "/proxy/44772/ping", map[string]string{ProxyKeyHeader: key}, 404, CodeSandboxNotFound},
		{"guessed id", base + "/sandboxes/sandbox-000000000099/proxy/44772/ping", map[string]string{APIKeyHeader: keyAlice}, 404, CodeSandboxNotFound},
		{"guessed id with key", base + "/sandboxes/sandbox-000000000099." + key + "/proxy/44772/ping", nil, 404, CodeSandboxNotFound},
		{"traversal to agent api", base + "/sandboxes/" + id + "." + key + "/proxy/44772/../v1/exec", nil, 400, CodeInvalidRequest},
		{"encoded traversal", base + "/sandboxes/" + id + "." + key + "/proxy/44772/%2e%2e/v1/exec", nil, 400, CodeInvalidRequest},
		{"encoded slash traversal", base + "/sandboxes/" + id + "." + key + "/proxy/44772/x%2f..%2fv1", nil, 400, CodeInvalidRequest},
		{"dot segment", base + "/sandboxes/" + id + "." + key + "/proxy/1318/./fs", nil, 400, CodeInvalidRequest},
		{"port zero", base + "/sandboxes/" + id + "." + key + "/proxy/0/", nil, 400, CodeInvalidPort},
		{"port too big", base + "/sandboxes/" + id + "." + key + "/proxy/99999/", nil, 400, CodeInvalidPort},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest("GET", "http://x", nil)
		req.URL, _ = req.URL.Parse(tc.url)
		// Keep the raw path: Go's client would otherwise send what the test spelt, which is the point.
		req.URL.Opaque = ""
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultTransport.RoundTrip(rawPath(req, tc.url))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), `"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, b, tc.status, tc.code)
		}
	}
	select {
	case r := <-rg.agentC:
		t.Fatalf("an attack reached the agent: %s", r.URL)
	default:
	}
}

// rawPath makes req send the path of u byte for byte.
func rawPath(req *http.Request, u string) *http.Request {
	rest := strings.TrimPrefix(u, "http://")
	host, path, _ := strings.Cut(rest, "/")
	req.URL.Scheme, req.URL.Host, req.Host = "http", host, host
	req.URL.Opaque = "/" + path
	if p, q, ok := strings.Cut(path, "?"); ok {
		req.URL.Opaque, req.URL.RawQuery = "/"+p, q
	}
	return req
}

func TestParseProxyPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
		want proxyPath
	}{
		{"/sandboxes/s-1/proxy/44772", true, proxyPath{ID: "s-1", Port: 44772}},
		{"/v1/sandboxes/s-1.k/proxy/80/a/b?", true, proxyPath{ID: "s-1", Key: "k", Port: 80, Rest: "/a/b?"}},
		{"/sandboxes/s-1/proxy/x/", false, proxyPath{}},
		{"/sandboxes/s-1/proxy/123456/", false, proxyPath{}},
		{"/v2/sandboxes/s-1/proxy/80", false, proxyPath{}},
		{"/sandboxes/s-1/endpoints/80", false, proxyPath{}},
	} {
		got, ok := parseProxyPath(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v", tc.path, got, ok)
		}
	}
}

// A replaced agent answers on the shared proxy origin, execd's port included, with a page that would register a
// service worker scoped to the whole origin (capturing other owners' /sandboxes/{id}.{key}/proxy URLs) and plant
// cookies: the answer runs under the sandbox CSP and the origin-wide headers never reach the client.
func TestProxyAnswerCannotClaimTheSharedOrigin(t *testing.T) {
	rg := newRig(t)
	id := rg.create(keyAlice, fastGPTBody)
	for _, port := range []string{"44772", "3000"} {
		ep := rg.endpoint(id, "44772")
		url := "http://" + strings.Replace(ep.Endpoint, "/44772", "/"+port, 1) + "/hostile.html"
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		<-rg.agentC
		if resp.StatusCode != 200 {
			t.Fatalf("port %s: status %d", port, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") || strings.Contains(csp, "allow-same-origin") {
			t.Errorf("port %s: answer has CSP %q, want the sandbox CSP", port, csp)
		}
		for _, h := range []string{"Service-Worker-Allowed", "Set-Cookie", "Clear-Site-Data"} {
			if v := resp.Header.Values(h); len(v) > 0 {
				t.Errorf("port %s: the sandbox's %s %q reached the client", port, h, v)
			}
		}
	}
}
