package caddymodule_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestE2BSDKEnvd drives envd through the gateway on Caddyfile.example with the real npm e2b SDK, unmodified:
// commands (blocking, streamed onStdout, non-zero exit, root refused, 2 MB of output, background with list,
// sendStdin, connect and kill), files (text, 3 MB of binary, several at once, list, exists, getInfo, rename,
// remove, makeDir, metadata, watchDir with entries) and a PTY (input, resize, kill), all through E2B's edge at
// 49983-{id}.{domain} with the sandbox's access token.
func TestE2BSDKEnvd(t *testing.T) {
	_, env, _, _ := e2bExample(t)
	script := filepath.Join(testenv.RepoRoot(), "agentimage", "testdata", "e2b_envd_sdk.cjs")
	out, err := testenv.RunNode(t, script, env...)
	if err != nil || !strings.Contains(out, "E2B SDK OK") {
		t.Fatalf("the E2B SDK script failed: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "figure:") {
			t.Log(line)
		}
	}
}

// TestE2BEnvdStreamsOverHTTP1 runs Connect server streams (process.Process/Start) through the edge over HTTP/1.1,
// as clients without h2 do (E2B's Python SDK, or any plain-HTTP E2B_SANDBOX_URL). A stream's answer starts before
// the proxy has read the request body to its end; a Go HTTP/1 server then consumes that body itself unless full
// duplex is on, and the proxy's upstream connection breaks mid-stream ("terminated").
func TestE2BEnvdStreamsOverHTTP1(t *testing.T) {
	g, env, _, _ := e2bExample(t)
	base := strings.TrimPrefix(env[0], "E2B_API_URL=")
	domain := strings.TrimPrefix(env[1], "E2B_DOMAIN=")
	_, port, _ := net.SplitHostPort(domain)
	ctx := t.Context()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: g.RootCAs(t, ctx), NextProtos: []string{"http/1.1"}},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
		},
	}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/sandboxes", strings.NewReader(`{"templateID":"base","envVars":{"V":"x"}}`))
	req.Header.Set("X-API-Key", e2bKeyAlice)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ SandboxID, EnvdAccessToken string }
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || created.SandboxID == "" {
		t.Fatalf("create: %d %+v", resp.StatusCode, created)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, base+"/sandboxes/"+created.SandboxID, nil)
		req.Header.Set("X-API-Key", e2bKeyAlice)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	})

	envdURL := "https://49983-" + created.SandboxID + "." + domain
	msg := `{"process":{"cmd":"/bin/bash","args":["-c","echo $V"]},"stdin":false}`
	for i := range 30 {
		// one Connect envelope, sent chunked as streaming clients send it
		body := io.MultiReader(bytes.NewReader([]byte{0, 0, 0, 0, byte(len(msg))}), strings.NewReader(msg))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, envdURL+"/process.Process/Start", io.NopCloser(body))
		req.Header.Set("Content-Type", "application/connect+json")
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set("X-Access-Token", created.EnvdAccessToken)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d over HTTP/1.1: status %d, reading the body: %v (%d bytes)", i, resp.StatusCode, err, len(raw))
		}
		// start, the output ("x\n" in base64), the end event, then the end-of-stream envelope (flag 2, "{}")
		var kinds []string
		for rest := raw; len(rest) >= 5; {
			n := int(rest[1])<<24 | int(rest[2])<<16 | int(rest[3])<<8 | int(rest[4])
			if len(rest) < 5+n {
				t.Fatalf("stream %d over HTTP/1.1: a cut envelope: %q", i, raw)
			}
			if rest[0] == 2 {
				kinds = append(kinds, "eos:"+string(rest[5:5+n]))
			} else {
				var m struct {
					Event map[string]map[string]any `json:"event"`
				}
				_ = json.Unmarshal(rest[5:5+n], &m)
				for k, v := range m.Event {
					if k == "data" {
						k += ":" + fmt.Sprint(v["stdout"])
					}
					kinds = append(kinds, k)
				}
			}
			rest = rest[5+n:]
		}
		if got := strings.Join(kinds, " "); got != "start data:eAo= end eos:{}" {
			t.Fatalf("stream %d over HTTP/1.1: %s (%q)", i, got, raw)
		}
	}
}

// TestE2BSDKChoosesGVisor: an E2B user picks gVisor by template, `base-isolated` in Caddyfile.example (the
// python-isolated profile, runtime runsc); commands and files work in it through envd, and its kernel is gVisor's.
func TestE2BSDKChoosesGVisor(t *testing.T) {
	_, env, _, _ := e2bExample(t)
	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_sdk_isolated.cjs"), env...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got struct{ Kernel, File, Python, Fatal string }
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Fatal != "" {
		t.Fatal(got.Fatal)
	}
	if !strings.Contains(got.Kernel, "gvisor") && !strings.Contains(got.Kernel, "4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016") {
		t.Errorf("kernel %q is not gVisor's", got.Kernel)
	}
	if got.File != "under gVisor" || got.Python != "42" {
		t.Errorf("file %q, python %q", got.File, got.Python)
	}
}
