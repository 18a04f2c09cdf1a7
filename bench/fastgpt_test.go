package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

const fastgptSecret = "bench-secret-bench-secret-bench-secret-0123"

// fastgptSetup is one sandbox container with the IDE agent, a stand-in FastGPT and a gateway running
// fastgpt_proxy, shared by the FastGPT benchmarks.
type fastgptSetup struct {
	agentWS  string // ws://ip:1318
	password string
	proxyWS  string // ws://127.0.0.1:port
}

// fastgptEnv is the setup of the benchmark running now.
var fastgptEnv *fastgptSetup

func setupFastGPT(b *testing.B) *fastgptSetup {
	b.Helper()
	testenv.Integration(b)
	if fastgptEnv != nil {
		return fastgptEnv
	}
	var sb *testenv.Sandbox
	var out []byte
	for attempt := 1; ; attempt++ {
		sb = testenv.RunSandbox(b, testenv.SandboxOptions{Env: []string{"IDE_AGENT_ENABLED=true"}})
		var err error
		if out, err = exec.Command("docker", "exec", sb.Name, "sh", "-c", "cat ~/.fastgpt-ide-agent-password").Output(); err == nil {
			break
		}
		// The image tag is shared with other worktrees' builds: rebuild ours (cached layers) and retry.
		if attempt == 3 {
			b.Fatalf("reading IDE agent password (image without the IDE agent?): %v", err)
		}
		build := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "images.sh"), "base")
		build.Dir = testenv.RepoRoot()
		if bout, err := build.CombinedOutput(); err != nil {
			b.Fatalf("rebuilding image: %v\n%s", err, bout)
		}
	}
	s := &fastgptSetup{agentWS: "ws://" + sb.IP + ":1318", password: strings.TrimSpace(string(out))}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-Proxy-Token") != fastgptSecret {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"code":403}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"code": 200, "data": map[string]any{
			"sandbox_url": "http://" + sb.IP + ":1318", "agent_token": s.password}})
	}))
	b.Cleanup(app.Close)
	port := testenv.FreePort(b)
	testenv.StartGateway(b, fmt.Sprintf("{\n\tadmin {$SANDGATE_ADMIN}\n}\nhttp://127.0.0.1:%d {\n\tfastgpt_proxy\n}\n", port),
		testenv.GatewayOptions{Env: []string{"AGENT_SANDBOX_PROXY_SECRET=" + fastgptSecret, "FASTGPT_APP_URL=" + app.URL}})
	s.proxyWS = fmt.Sprintf("ws://127.0.0.1:%d", port)
	fastgptEnv = s
	// b.Cleanup of the first benchmark removes the container; later benchmarks set up again.
	b.Cleanup(func() { fastgptEnv = nil })
	return s
}

func (s *fastgptSetup) dial(b *testing.B, viaProxy bool, channel string) *websocket.Conn {
	b.Helper()
	url := s.agentWS + "/" + channel + "?token=" + s.password + "&permission=write"
	if viaProxy {
		now := time.Now()
		ticket, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sourceType": "skillEdit", "sourceId": "s",
			"userId": "u", "chatId": "c", "teamId": "t", "channel": channel, "permission": "write",
			"iat": now.Unix(), "exp": now.Unix() + 60}).SignedString([]byte(fastgptSecret))
		if err != nil {
			b.Fatal(err)
		}
		url = s.proxyWS + "/" + channel + "?ticket=" + ticket
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		b.Fatalf("dial %s: %v", url[:strings.Index(url, "?")], err)
	}
	c.SetReadLimit(64 << 20)
	b.Cleanup(func() { c.CloseNow() })
	return c
}

// compare measures one operation directly against the agent and through the gateway, alternating the two in
// every iteration so both see the same machine load, and reports the medians and their ratio. prepare returns the
// operation bound to a fresh connection.
func compare(b *testing.B, name string, prepare func(b *testing.B, viaProxy bool) func()) {
	direct, proxied := prepare(b, false), prepare(b, true)
	var dd, pd []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		direct()
		mid := time.Now()
		proxied()
		dd, pd = append(dd, mid.Sub(start)), append(pd, time.Since(mid))
	}
	b.StopTimer()
	md, mp := testenv.Percentile(dd, .5), testenv.Percentile(pd, .5)
	b.ReportMetric(float64(md.Microseconds()), "direct-µs")
	b.ReportMetric(float64(mp.Microseconds()), "proxy-µs")
	b.ReportMetric(float64(mp)/float64(md), "ratio")
	if b.N > 1 {
		fmt.Printf("%s (median of %d): direct %v, through fastgpt_proxy %v, ratio %.2fx\n", name, b.N, md, mp, float64(mp)/float64(md))
	}
}

// BenchmarkFastGPTReadFile: one fs/read_file JSON-RPC round trip of a 4 KiB file.
func BenchmarkFastGPTReadFile(b *testing.B) {
	s := setupFastGPT(b)
	content := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("sandgate "), 455))
	compare(b, "fs/read_file 4 KiB round trip", func(b *testing.B, via bool) func() {
		c := s.dial(b, via, "fs")
		ctx := context.Background()
		call := func(id int, method string, params any) {
			req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
			if err := c.Write(ctx, websocket.MessageText, req); err != nil {
				b.Fatal(err)
			}
			for {
				_, data, err := c.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if bytes.Contains(data, []byte(fmt.Sprintf(`"id":%d,`, id))) {
					if bytes.Contains(data, []byte(`"error"`)) {
						b.Fatalf("%s: %s", method, data)
					}
					return
				}
			}
		}
		path := testenv.Unique("bench") + ".txt"
		call(1, "fs/write_file", map[string]any{"path": path, "content": content})
		id := 1
		return func() {
			id++
			call(id, "fs/read_file", map[string]any{"path": path})
		}
	})
}

// BenchmarkFastGPTTerminalEcho: one keystroke to a raw-mode `cat` on the PTY and its echo back.
func BenchmarkFastGPTTerminalEcho(b *testing.B) {
	s := setupFastGPT(b)
	compare(b, "terminal keystroke echo", func(b *testing.B, via bool) func() {
		c := s.dial(b, via, "terminal")
		ctx := context.Background()
		if err := c.Write(ctx, websocket.MessageBinary, []byte("stty raw -echo; echo READY; exec cat\n")); err != nil {
			b.Fatal(err)
		}
		var seen bytes.Buffer
		for !bytes.Contains(seen.Bytes(), []byte("READY\r\n")) && !bytes.Contains(seen.Bytes(), []byte("READY\n")) {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			seen.Write(data)
		}
		time.Sleep(100 * time.Millisecond) // let cat start reading
		return func() {
			if err := c.Write(ctx, websocket.MessageBinary, []byte{'k'}); err != nil {
				b.Fatal(err)
			}
			for got := false; !got; {
				_, data, err := c.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				got = bytes.IndexByte(data, 'k') >= 0
			}
		}
	})
}
