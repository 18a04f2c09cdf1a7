package main_test

import (
	"encoding/json"
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

// TestE2BSDKStreamsNodeAndRCells runs the unmodified npm @e2b/code-interpreter SDK against the agent's code
// interpreter in the r image (R and Node): a JavaScript cell and an R cell each print a line, then wait for a flag
// file the script writes through envd only once onStdout delivered that line, so the line arrived while the cell
// still ran. The SDK runs in its debug mode with E2B_SANDBOX_URL at a loopback stand-in for the gateway's edge,
// which sends E2B's code-interpreter port (E2b-Sandbox-Port: 49999) to /e2b/code and the rest to /e2b/envd.
func TestE2BSDKStreamsNodeAndRCells(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "r", Capabilities: []string{"shell", "filesystem"}})
	target, err := url.Parse(sb.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			prefix := agentapi.E2BEnvdPrefix
			if r.In.Header.Get("E2b-Sandbox-Port") == "49999" {
				prefix = agentapi.E2BCodePrefix
			}
			r.Out.URL.Path = prefix + r.In.URL.Path
			r.Out.URL.RawPath = ""
			r.Out.Header.Set(agentapi.TokenHeader, sb.Token)
		},
		FlushInterval: -1,
	}
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(edge.Close)

	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_code_stream.cjs"),
		"E2B_DEBUG=true", "E2B_SANDBOX_URL="+edge.URL, "E2B_API_KEY=e2b_unused_in_debug_mode")
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep struct {
		JS, R struct {
			Stdout string
			Chunks int
			Error  *string
		}
		RAfter, JSAfter struct{ Stdout, Stderr, Text string }
		Fatal           string
	}
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)
	for name, c := range map[string]struct {
		Stdout string
		Chunks int
		Error  *string
	}{"js": rep.JS, "r": rep.R} {
		if c.Stdout != "first\nsecond\n" || c.Chunks < 2 || c.Error != nil {
			t.Errorf("%s cell: %+v (want first\\nsecond\\n in two chunks: the first line before the cell ended)", name, c)
		}
	}
	if rep.RAfter.Stdout != "[1] 1\n[1] 2\n[1] 3\n[1] 42\n" || rep.RAfter.Stderr != "to stderr\n" {
		t.Errorf("r output after the streamed cell: %+v", rep.RAfter)
	}
	if rep.JSAfter.Stdout != "a\n" || rep.JSAfter.Stderr != "b\n" || rep.JSAfter.Text != "7" {
		t.Errorf("js output after the streamed cell: %+v", rep.JSAfter)
	}
}
