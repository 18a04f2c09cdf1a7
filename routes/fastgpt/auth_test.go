package fastgpt

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestNewRefusesShortSecret(t *testing.T) {
	if _, err := New(Config{Secret: strings.Repeat("x", 31)}); !errors.Is(err, ErrSecretTooShort) {
		t.Fatalf("31-byte secret: %v, want ErrSecretTooShort", err)
	}
	if _, err := New(Config{Secret: strings.Repeat("x", 32)}); err != nil {
		t.Fatalf("32-byte secret refused: %v", err)
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t, nil)
	resp, err := http.Get(e.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body := readAll(t, resp.Body); resp.StatusCode != 200 || body != "OK" {
		t.Fatalf("health: %d %q", resp.StatusCode, body)
	}
	resp2, err := http.Get(e.srv.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %d", resp2.StatusCode)
	}
}

// TestWebSocketAuthStatuses: every refusal of the WebSocket routes, with the original's status, fixed body and
// headers; the 401s never reach FastGPT.
func TestWebSocketAuthStatuses(t *testing.T) {
	now := time.Now()
	good := func(channel, perm string) string { return signTicket(t, testSecret, testClaims(channel, perm), now) }
	noExp := func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"channel": "fs", "permission": "read"}).SignedString([]byte(testSecret))
		return s
	}
	hs512 := func() string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"channel": "fs", "permission": "read",
			"exp": now.Add(time.Minute).Unix()}).SignedString([]byte(testSecret))
		return s
	}
	fail := func(status int) func(w http.ResponseWriter, _ *http.Request) bool {
		return func(w http.ResponseWriter, _ *http.Request) bool { jsonRes(w, status, nil); return false }
	}
	cases := []struct {
		name, channel, ticket string
		verify                func(w http.ResponseWriter, _ *http.Request) bool
		timeout               bool
		appDown               bool
		want                  int
		wantVerify            bool
	}{
		{name: "missing ticket", channel: "fs", ticket: "", want: 401},
		{name: "garbage ticket", channel: "fs", ticket: "not-a-jwt", want: 401},
		{name: "bad signature", channel: "fs", ticket: signTicket(t, "another-secret-another-secret-another", testClaims("fs", "read"), now), want: 401},
		{name: "expired", channel: "fs", ticket: signTicket(t, testSecret, testClaims("fs", "read"), now.Add(-70*time.Second)), want: 401},
		{name: "no exp", channel: "fs", ticket: noExp(), want: 401},
		{name: "wrong algorithm", channel: "fs", ticket: hs512(), want: 401},
		{name: "channel mismatch", channel: "fs", ticket: good("terminal", "write"), want: 401},
		{name: "terminal with read", channel: "terminal", ticket: good("terminal", "read"), want: 401},
		{name: "verifyTicket 4xx", channel: "fs", ticket: good("fs", "read"), verify: fail(401), want: 403, wantVerify: true},
		{name: "verifyTicket 5xx", channel: "fs", ticket: good("fs", "read"), verify: fail(500), want: 403, wantVerify: true},
		{name: "verifyTicket code not 200", channel: "fs", ticket: good("fs", "read"), verify: func(w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"code":500,"statusText":"x","message":"sandbox error","data":null}`))
			return false
		}, want: 403, wantVerify: true},
		{name: "verifyTicket timeout", channel: "fs", ticket: good("fs", "read"), timeout: true, verify: func(w http.ResponseWriter, _ *http.Request) bool {
			time.Sleep(1500 * time.Millisecond)
			return true
		}, want: 403, wantVerify: true},
		{name: "FastGPT unreachable", channel: "fs", ticket: good("fs", "read"), appDown: true, want: 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				if tc.timeout {
					c.RequestTimeout = 300 * time.Millisecond
				}
			})
			e.app.verify = tc.verify
			if tc.appDown {
				e.app.srv.Close()
			}
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/"+tc.channel+"?ticket="+tc.ticket, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := readAll(t, resp.Body)
			wantBody := map[int]string{401: "Unauthorized", 403: "Forbidden"}[tc.want]
			if resp.StatusCode != tc.want || body != wantBody {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.want, wantBody)
			}
			for k, v := range map[string]string{"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "private, no-store",
				"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if called := e.app.verifyN.Load() > 0; called != tc.wantVerify {
				t.Errorf("verifyTicket called: %v, want %v", called, tc.wantVerify)
			}
		})
	}
}

// TestTicketLeeway: a ticket expired 3 s ago still passes the local check (5 s leeway).
func TestTicketLeeway(t *testing.T) {
	ticket := signTicket(t, testSecret, testClaims("fs", "read"), time.Now().Add(-63*time.Second))
	if _, err := parseTicket([]byte(testSecret), ticket); err != nil {
		t.Fatalf("ticket within leeway refused: %v", err)
	}
	ticket = signTicket(t, testSecret, testClaims("fs", "read"), time.Now().Add(-66*time.Second))
	if _, err := parseTicket([]byte(testSecret), ticket); err == nil {
		t.Fatal("ticket 6 s past exp accepted")
	}
}

// TestVerifyTicketRequest: the call carries the ticket and the proxy token in the original's headers.
func TestVerifyTicketRequest(t *testing.T) {
	e := newEnv(t, nil)
	ticket := signTicket(t, testSecret, testClaims("fs", "read"), time.Now())
	c, _, err := websocketDial(e, "fs", ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	h := <-e.app.headers
	if h.Get("X-Sandbox-Ticket") != ticket || h.Get("X-Proxy-Token") != testSecret {
		t.Fatalf("verifyTicket headers: %v", h)
	}
}
