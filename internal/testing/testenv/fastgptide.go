package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
)

// FastGPTApp is FastGPT's main service as far as fastgpt_proxy asks it: verifyTicket, checked against the proxy's
// secret, answers the sandbox the test last pointed it at (Point). It listens on 127.0.0.1.
type FastGPTApp struct {
	URL string

	mu                     sync.Mutex
	sandboxURL, agentToken string
}

// NewFastGPTApp starts the fake app for a proxy configured with secret; it stops when the test ends.
func NewFastGPTApp(t testing.TB, secret string) *FastGPTApp {
	t.Helper()
	a := &FastGPTApp{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/core/ai/sandbox/verifyTicket" || r.Header.Get("X-Proxy-Token") != secret {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		a.mu.Lock()
		data := map[string]any{"sandbox_url": a.sandboxURL, "agent_token": a.agentToken}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"code": 200, "data": data})
	}))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// Point makes verifyTicket answer this sandbox URL (an endpoint of port 1318) and IDE agent password.
func (a *FastGPTApp) Point(sandboxURL, agentToken string) {
	a.mu.Lock()
	a.sandboxURL, a.agentToken = sandboxURL, agentToken
	a.mu.Unlock()
}

// FastGPTIDE speaks FastGPT's IDE protocol through the fastgpt_proxy at proxyAddr (host:port), with a write ticket
// signed with secret as FastGPT signs them (the proxy's verifyTicket then names the sandbox): fs/write_file of
// "hello ide" at path, then fs/exec of command, whose stdout it returns. A failed call fails the test.
func FastGPTIDE(t testing.TB, proxyAddr, secret, path, command string) string {
	t.Helper()
	now := time.Now()
	ticket, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sourceType": "chat", "sourceId": "app-1",
		"userId": "u", "chatId": "c", "teamId": "t", "channel": "fs", "permission": "write",
		"iat": now.Unix(), "exp": now.Unix() + 60}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	c, _, err := websocket.Dial(ctx, fmt.Sprintf("ws://%s/fs?ticket=%s", proxyAddr, ticket), nil)
	if err != nil {
		t.Fatalf("dialing fastgpt_proxy: %v", err)
	}
	defer c.CloseNow()
	call := func(id int, method string, params any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var m map[string]any
			if json.Unmarshal(msg, &m) == nil && m["id"] == float64(id) {
				return m
			}
		}
	}
	if got := call(1, "fs/write_file", map[string]any{"path": path, "content": "aGVsbG8gaWRl"}); got["error"] != nil {
		t.Fatalf("fs/write_file: %v", got)
	}
	got := call(2, "fs/exec", map[string]any{"command": command})
	res, _ := got["result"].(map[string]any)
	if res == nil || res["exitCode"] != float64(0) {
		t.Fatalf("fs/exec %q through the relay: %v", command, got)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	stdout, _ := res["stdout"].(string)
	return stdout
}
