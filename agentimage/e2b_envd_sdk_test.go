package main_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestE2BSDKAgainstAgentEnvd runs the unmodified npm `e2b` SDK (package-lock.json's version) against envd in a real
// sandbox. The SDK runs in its debug mode (no control plane) with E2B_SANDBOX_URL pointing at a loopback stand-in
// for the gateway's E2B edge: it adds the agent token, the /e2b/envd prefix and the sandbox env header, as the edge
// does. The gateway's own SDK tests (routes/e2b) cover create, the edge and E2B's access token.
func TestE2BSDKAgainstAgentEnvd(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{})
	target, err := url.Parse(sb.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = agentapi.E2BEnvdPrefix + r.In.URL.Path
			r.Out.URL.RawPath = ""
			r.Out.Header.Set(agentapi.TokenHeader, sb.Token)
			r.Out.Header.Set(agentapi.E2BEnvHeader, `{"SBX_VAR":"from-create"}`)
		},
		FlushInterval: -1,
	}
	// HTTP/1.1 servers consume the rest of a request body when the response starts, unless told to read and write
	// at once: a proxy streaming a Connect answer while still forwarding the request's end must be full duplex.
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(edge.Close)

	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_envd_sdk.cjs"),
		"E2B_DEBUG=true", "E2B_SANDBOX_URL="+edge.URL, "E2B_API_KEY=e2b_unused_in_debug_mode")
	if err != nil || !strings.Contains(out, "E2B SDK OK") {
		t.Fatalf("the E2B SDK script failed: %v\n%s", err, out)
	}
}
