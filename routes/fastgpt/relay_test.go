package fastgpt

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func websocketDial(e *env, channel, ticket string) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(e.ctx, e.wsURL(channel, ticket), nil)
}

// TestRelayEcho: text and binary frames pass both ways; the agent URL carries token and permission verbatim.
func TestRelayEcho(t *testing.T) {
	for _, tc := range []struct{ channel, perm string }{{"fs", "read"}, {"fs", "write"}, {"terminal", "write"}} {
		t.Run(tc.channel+"-"+tc.perm, func(t *testing.T) {
			e := newEnv(t, nil)
			e.agent.token = "tok-with_chars.~" // appended verbatim, as the original
			c := e.dial(tc.channel, tc.perm)
			echo(t, e.ctx, c, websocket.MessageText, `{"jsonrpc":"2.0","id":1,"method":"fs/read_dir","params":{"path":"."}}`)
			echo(t, e.ctx, c, websocket.MessageBinary, "\xfe\x00\x00\x00\x50\x00\x00\x00\x18\x00\x00\x00\x00")
			ac := e.agent.nextConn(t)
			if ac.path != "/"+tc.channel || ac.query != "token=tok-with_chars.~&permission="+tc.perm {
				t.Fatalf("agent got %s?%s", ac.path, ac.query)
			}
		})
	}
}

// TestRelayFragmentsToFrameLimit: a message larger than max_frame_bytes arrives whole.
func TestRelayFragmentsToFrameLimit(t *testing.T) {
	e := newEnv(t, nil)
	e.app.data = map[string]any{"sandbox_url": e.agent.srv.URL, "agent_token": e.agent.token,
		"ws_limits": map[string]any{"max_message_bytes": 1 << 20, "max_frame_bytes": 1000}}
	c := e.dial("fs", "read")
	echo(t, e.ctx, c, websocket.MessageBinary, strings.Repeat("x", 5000))
}

// TestRelayRetriesUntilAgentAccepts: the agent refuses the first handshakes (cold start); frames the browser sent
// meanwhile are delivered in order once it accepts.
func TestRelayRetriesUntilAgentAccepts(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.timing.connectInterval = 100 * time.Millisecond })
	e.agent.refuse.Store(7)
	c := e.dial("fs", "read")
	for i := 0; i < 5; i++ {
		if err := c.Write(e.ctx, websocket.MessageText, []byte{'a' + byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		_, got, err := c.Read(e.ctx)
		if err != nil || string(got) != string(rune('a'+i)) {
			t.Fatalf("frame %d: %q %v", i, got, err)
		}
	}
	if e.agent.refuse.Load() != 0 {
		t.Fatal("agent was not retried")
	}
}

// TestRelayAgentNeverAccepts: 10 refused attempts end in 1011.
func TestRelayAgentNeverAccepts(t *testing.T) {
	e := newEnv(t, nil)
	e.agent.refuse.Store(1000)
	c := e.dial("fs", "read")
	expectClose(t, e.ctx, c, websocket.StatusInternalError, "Failed to connect sandbox agent")
	if n := 1000 - e.agent.refuse.Load(); n != 10 {
		t.Fatalf("%d attempts, want 10", n)
	}
}

// TestRelayHandshakeBufferLimit: a sixth frame before the agent answers closes with 1008.
func TestRelayHandshakeBufferLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.timing.connectInterval = 500 * time.Millisecond })
	e.agent.refuse.Store(1000)
	c := e.dial("fs", "read")
	for i := 0; i < 6; i++ {
		if err := c.Write(e.ctx, websocket.MessageText, []byte("early")); err != nil {
			t.Fatal(err)
		}
	}
	expectClose(t, e.ctx, c, websocket.StatusPolicyViolation, "Handshake buffer limit exceeded")
}

// TestRelayBadAddress: what verifyTicket returned cannot be used.
func TestRelayBadAddress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   map[string]any
		reason string
	}{
		{"no token", map[string]any{"sandbox_url": "http://127.0.0.1:1"}, "Agent token is missing"},
		{"no url", map[string]any{"agent_token": "x"}, "Sandbox endpoint is missing"},
		{"bad scheme", map[string]any{"agent_token": "x", "sandbox_url": "ftp://host:1318"}, "Invalid sandbox endpoint"},
		{"null data", nil, "Agent token is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			if tc.data == nil {
				e.app.verify = func(w http.ResponseWriter, _ *http.Request) bool { jsonRes(w, 200, nil); return false }
			} else {
				e.app.data = tc.data
			}
			c := e.dial("fs", "read")
			expectClose(t, e.ctx, c, websocket.StatusPolicyViolation, tc.reason)
		})
	}
}

// TestRelayAgentMessageTooLarge: an agent message over max_message_bytes closes the browser with 1009.
func TestRelayAgentMessageTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	e.app.data = map[string]any{"sandbox_url": e.agent.srv.URL, "agent_token": e.agent.token,
		"ws_limits": map[string]any{"max_message_bytes": 1024, "max_frame_bytes": 1024}}
	e.agent.handle = func(c *websocket.Conn) {
		_ = c.Write(context.Background(), websocket.MessageBinary, make([]byte, 2048))
		_, _, _ = c.Read(context.Background())
	}
	c := e.dial("terminal", "write")
	expectClose(t, e.ctx, c, websocket.StatusMessageTooBig, "Sandbox message too large")
}

// TestRelayAgentCloses: the agent's close frame reaches the browser verbatim; without a status the fallback is used;
// a dropped TCP connection is 1011.
func TestRelayAgentCloses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		close  func(c *websocket.Conn)
		code   websocket.StatusCode
		reason string
	}{
		{"with code", func(c *websocket.Conn) { _ = c.Close(4000, "agent says bye") }, 4000, "agent says bye"},
		{"normal", func(c *websocket.Conn) { _ = c.Close(websocket.StatusNormalClosure, "") }, websocket.StatusNormalClosure, ""},
		{"no status", func(c *websocket.Conn) { _ = c.Close(websocket.StatusNoStatusRcvd, "") }, websocket.StatusNormalClosure, "Sandbox agent closed"},
		{"dropped", func(c *websocket.Conn) { _ = c.CloseNow() }, websocket.StatusInternalError, "Sandbox agent connection lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.agent.handle = func(c *websocket.Conn) {
				_, _, _ = c.Read(context.Background())
				tc.close(c)
			}
			c := e.dial("fs", "read")
			if err := c.Write(e.ctx, websocket.MessageText, []byte("go")); err != nil {
				t.Fatal(err)
			}
			expectClose(t, e.ctx, c, tc.code, tc.reason)
		})
	}
}

// TestRelayClientGone: a browser that vanishes closes the agent with 1000 "Client connection closed"; a browser
// close frame is relayed verbatim.
func TestRelayClientGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		close  func(c *websocket.Conn)
		code   websocket.StatusCode
		reason string
	}{
		{"dropped", func(c *websocket.Conn) { _ = c.CloseNow() }, websocket.StatusNormalClosure, "Client connection closed"},
		{"close frame", func(c *websocket.Conn) { _ = c.Close(4001, "tab closed") }, 4001, "tab closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			c := e.dial("fs", "read")
			echo(t, e.ctx, c, websocket.MessageText, "hi")
			ac := e.agent.nextConn(t)
			tc.close(c)
			select {
			case err := <-ac.err:
				if st := websocket.CloseStatus(err); st != tc.code || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("agent saw %v, want %d %q", err, tc.code, tc.reason)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("agent connection not closed")
			}
		})
	}
}

// TestRelayPingsAgent: the agent receives pings on the interval.
func TestRelayPingsAgent(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.timing.pingInterval = 50 * time.Millisecond })
	c := e.dial("fs", "read")
	echo(t, e.ctx, c, websocket.MessageText, "hi")
	deadline := time.Now().Add(5 * time.Second)
	for e.agent.pings.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings", e.agent.pings.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRelayKeepalive: calls carry the claims; a 4xx closes both sides with 1008; three failures in a row with 1011;
// a success in between resets the count.
func TestRelayKeepalive(t *testing.T) {
	t.Run("body", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.timing.keepaliveInterval = 50 * time.Millisecond })
		c := e.dial("fs", "read")
		echo(t, e.ctx, c, websocket.MessageText, "hi")
		body := <-e.app.keeps
		for k, v := range map[string]string{"sourceType": "skillEdit", "sourceId": "skill-1", "userId": "user-1", "chatId": "chat-1", "teamId": "team-1"} {
			if body[k] != v {
				t.Fatalf("keepalive body %v", body)
			}
		}
		echo(t, e.ctx, c, websocket.MessageText, "still open")
	})
	t.Run("rejected", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.timing.keepaliveInterval = 50 * time.Millisecond })
		e.app.keepFn = func(int) int { return 404 }
		c := e.dial("fs", "read")
		echo(t, e.ctx, c, websocket.MessageText, "hi")
		ac := e.agent.nextConn(t)
		expectClose(t, e.ctx, c, websocket.StatusPolicyViolation, "Sandbox keepalive rejected")
		if err := <-ac.err; websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "Sandbox keepalive rejected") {
			t.Fatalf("agent saw %v", err)
		}
	})
	t.Run("failing", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.timing.keepaliveInterval = 50 * time.Millisecond })
		// 500, 500, 200, 500, 500, 500: only the last three in a row end the relay.
		e.app.keepFn = func(n int) int {
			if n == 3 {
				return 200
			}
			return 500
		}
		c := e.dial("fs", "read")
		expectClose(t, e.ctx, c, websocket.StatusInternalError, "Sandbox keepalive failed")
		if n := e.app.keepN.Load(); n != 6 {
			t.Fatalf("%d keepalive calls, want 6", n)
		}
	})
}

// TestCloseEndsRelays: Close (Caddy's Cleanup) sends 1001 to the browser and the agent and refuses new relays.
func TestCloseEndsRelays(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("fs", "read")
	echo(t, e.ctx, c, websocket.MessageText, "hi")
	ac := e.agent.nextConn(t)
	if n := e.proxy.OpenRelays(); n != 1 {
		t.Fatalf("%d open relays", n)
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- e.proxy.Close(ctx)
	}()
	expectClose(t, e.ctx, c, websocket.StatusGoingAway, "")
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := <-ac.err; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("agent saw %v", err)
	}
	if n := e.proxy.OpenRelays(); n != 0 {
		t.Fatalf("%d open relays after Close", n)
	}
}

// TestRelayClientLeavesWhileConnecting: a browser that closes before the agent answers ends the attempt: no more
// dials and the relay is gone.
func TestRelayClientLeavesWhileConnecting(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.timing.connectInterval = 100 * time.Millisecond })
	e.agent.refuse.Store(1000)
	c := e.dial("fs", "read")
	time.Sleep(150 * time.Millisecond)
	_ = c.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(5 * time.Second)
	for e.proxy.OpenRelays() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("relay still open after the browser left")
		}
		time.Sleep(10 * time.Millisecond)
	}
	attempts := 1000 - e.agent.refuse.Load()
	time.Sleep(400 * time.Millisecond)
	if later := 1000 - e.agent.refuse.Load(); later != attempts || attempts >= 10 {
		t.Fatalf("dialing went on after the browser left: %d then %d attempts", attempts, later)
	}
}

// TestRelayClientMessageTooLarge: a browser message over max_message_bytes is refused with 1009 by the gateway and
// the agent is told the client went away.
func TestRelayClientMessageTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	e.app.data = map[string]any{"sandbox_url": e.agent.srv.URL, "agent_token": e.agent.token,
		"ws_limits": map[string]any{"max_message_bytes": 1024}}
	c := e.dial("fs", "write")
	echo(t, e.ctx, c, websocket.MessageText, "small")
	ac := e.agent.nextConn(t)
	if err := c.Write(e.ctx, websocket.MessageBinary, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(e.ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("browser got %v, want 1009", err)
	}
	if err := <-ac.err; websocket.CloseStatus(err) != websocket.StatusNormalClosure || !strings.Contains(err.Error(), "Client connection closed") {
		t.Fatalf("agent saw %v", err)
	}
}

// TestRelayRefusesAgentRedirect: a replaced agent that answers the WebSocket handshake with a redirect to a
// loopback service gets no request sent there (the websocket library would follow it, rewriting ws: to http:);
// the relay fails as for an agent that never accepts.
func TestRelayRefusesAgentRedirect(t *testing.T) {
	var hits atomic.Int32
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(victim.Close)
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, victim.URL+"/config/", status)
		}))
		t.Cleanup(agent.Close)
		e := newEnv(t, nil)
		e.app.data = map[string]any{"sandbox_url": agent.URL, "agent_token": e.agent.token}
		c := e.dial("fs", "read")
		expectClose(t, e.ctx, c, websocket.StatusInternalError, "Failed to connect sandbox agent")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback listener got %d requests", n)
	}
}
