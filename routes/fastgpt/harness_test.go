package fastgpt

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

const testSecret = "0123456789abcdef0123456789abcdef-test-secret"

// signTicket signs claims as FastGPT's getTicket does: jsonwebtoken HS256, iat now, exp = iat + 60.
func signTicket(t testing.TB, secret string, c Claims, iat time.Time) string {
	t.Helper()
	claims := jwt.MapClaims{
		"sourceType": c.SourceType, "sourceId": c.SourceID, "userId": c.UserID, "chatId": c.ChatID,
		"teamId": c.TeamID, "channel": c.Channel, "permission": c.Permission,
		"iat": iat.Unix(), "exp": iat.Unix() + 60,
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testClaims(channel, permission string) Claims {
	return Claims{SourceType: "skillEdit", SourceID: "skill-1", UserID: "user-1", ChatID: "chat-1", TeamID: "team-1",
		Channel: channel, Permission: permission}
}

// fakeApp stands in for FastGPT's main service: verifyTicket and keepalive as section 3 of the reference describes,
// with the envelope {code, statusText, message, data}.
type fakeApp struct {
	t       testing.TB
	secret  string
	srv     *httptest.Server
	mu      sync.Mutex
	data    map[string]any // verifyTicket data; nil means point at the fake agent
	agent   *fakeAgent
	verify  func(w http.ResponseWriter, r *http.Request) bool
	keepFn  func(n int) int // HTTP status of the n-th keepalive (1-based)
	verifyN atomic.Int32
	keepN   atomic.Int32
	keeps   chan map[string]any
	// previews maps "sandboxId:sessionId" to the agent it resolves to.
	previews map[string]*fakeAgent
	headers  chan http.Header
}

func newFakeApp(t testing.TB, agent *fakeAgent) *fakeApp {
	a := &fakeApp{t: t, secret: testSecret, agent: agent, keeps: make(chan map[string]any, 100),
		previews: map[string]*fakeAgent{}, headers: make(chan http.Header, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+verifyTicketPath, a.serveVerify)
	mux.HandleFunc("POST "+keepalivePath, a.serveKeepalive)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func jsonRes(w http.ResponseWriter, code int, data any) {
	status := http.StatusOK
	if code >= 400 {
		status = code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "statusText": "", "message": "", "data": data})
}

func (a *fakeApp) serveVerify(w http.ResponseWriter, r *http.Request) {
	a.verifyN.Add(1)
	select {
	case a.headers <- r.Header.Clone():
	default:
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Proxy-Token")), []byte(a.secret)) != 1 {
		jsonRes(w, 403, nil)
		return
	}
	a.mu.Lock()
	verify, data, agent := a.verify, a.data, a.agent
	a.mu.Unlock()
	if verify != nil && !verify(w, r) {
		return
	}
	if session := r.Header.Get("X-Sandbox-Preview-Session"); session != "" {
		a.mu.Lock()
		pa := a.previews[session]
		a.mu.Unlock()
		if pa == nil {
			jsonRes(w, 404, nil)
			return
		}
		jsonRes(w, 200, map[string]any{"sandbox_url": pa.srv.URL, "agent_token": pa.token})
		return
	}
	ticket := r.Header.Get("X-Sandbox-Ticket")
	if _, err := jwt.Parse(ticket, func(*jwt.Token) (any, error) { return []byte(a.secret), nil }); err != nil {
		jsonRes(w, 500, "Invalid ticket signature: "+err.Error())
		return
	}
	if data == nil {
		data = map[string]any{"sandbox_url": agent.srv.URL, "agent_token": agent.token}
	}
	jsonRes(w, 200, data)
}

func (a *fakeApp) serveKeepalive(w http.ResponseWriter, r *http.Request) {
	n := int(a.keepN.Add(1))
	if r.Header.Get("X-Proxy-Token") != a.secret {
		jsonRes(w, 403, nil)
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	a.keeps <- body
	status := 200
	if a.keepFn != nil {
		status = a.keepFn(n)
	}
	jsonRes(w, status, nil)
}

// fakeAgent stands in for the IDE agent: WebSocket /fs and /terminal (echo unless told otherwise) and /preview/.
type fakeAgent struct {
	t      testing.TB
	srv    *httptest.Server
	token  string
	refuse atomic.Int32 // handshakes still to refuse with 503
	pings  atomic.Int32
	conns  chan *agentConn
	// handle, when set, serves the connection instead of the echo loop.
	handle  func(c *websocket.Conn)
	preview http.HandlerFunc
}

type agentConn struct {
	query string
	path  string
	err   chan error // the read error that ended the echo loop
}

func newFakeAgent(t testing.TB, token string) *fakeAgent {
	ag := &fakeAgent{t: t, token: token, conns: make(chan *agentConn, 16)}
	ag.srv = httptest.NewServer(http.HandlerFunc(ag.serve))
	t.Cleanup(ag.srv.Close)
	return ag
}

func (ag *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/preview/") {
		if r.Header.Get("X-Fastgpt-Agent-Token") != ag.token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		ag.preview(w, r)
		return
	}
	if ag.refuse.Load() > 0 {
		ag.refuse.Add(-1)
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	if r.URL.Query().Get("token") != ag.token {
		http.Error(w, "Unauthorized: bad token", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		OnPingReceived: func(context.Context, []byte) bool { ag.pings.Add(1); return true },
	})
	if err != nil {
		return
	}
	ac := &agentConn{query: r.URL.RawQuery, path: r.URL.Path, err: make(chan error, 1)}
	ag.conns <- ac
	if ag.handle != nil {
		ag.handle(c)
		return
	}
	ctx := context.Background()
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			ac.err <- err
			c.CloseNow()
			return
		}
		if err := c.Write(ctx, typ, data); err != nil {
			ac.err <- err
			return
		}
	}
}

func (ag *fakeAgent) nextConn(t testing.TB) *agentConn {
	t.Helper()
	select {
	case c := <-ag.conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("the agent got no connection")
		return nil
	}
}

type env struct {
	t      *testing.T
	app    *fakeApp
	agent  *fakeAgent
	proxy  *Proxy
	srv    *httptest.Server
	logs   *testenv.SyncBuffer
	ctx    context.Context
	cancel context.CancelFunc
}

// newEnv starts a fake FastGPT, a fake agent and the proxy with fast timings; tweak adjusts the config.
func newEnv(t *testing.T, tweak func(*Config)) *env {
	t.Helper()
	e := &env{t: t, logs: &testenv.SyncBuffer{}}
	e.agent = newFakeAgent(t, "agent-token-"+t.Name())
	e.app = newFakeApp(t, e.agent)
	cfg := Config{
		Secret: testSecret, AppURL: e.app.srv.URL + "/", RequestTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	cfg.timing = timing{connectInterval: 20 * time.Millisecond, pingInterval: time.Hour, keepaliveInterval: time.Hour,
		closeWait: time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	e.srv = httptest.NewServer(p)
	e.ctx, e.cancel = context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(func() {
		e.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
		e.srv.Close()
		logs := e.logs.String()
		for _, secret := range []string{e.agent.token, testSecret, "eyJ"} {
			if strings.Contains(logs, secret) {
				t.Errorf("a secret (%.8s...) appears in the logs:\n%s", secret, logs)
			}
		}
	})
	return e
}

func (e *env) wsURL(channel, ticket string) string {
	return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/" + channel + "?ticket=" + ticket
}

// dial opens a browser WebSocket with a fresh ticket for channel/permission.
func (e *env) dial(channel, permission string) *websocket.Conn {
	e.t.Helper()
	ticket := signTicket(e.t, testSecret, testClaims(channel, permission), time.Now())
	c, resp, err := websocket.Dial(e.ctx, e.wsURL(channel, ticket), nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		e.t.Fatalf("dial %s: %v (status %d)", channel, err, status)
	}
	e.t.Cleanup(func() { c.CloseNow() })
	return c
}

// expectClose reads until the connection closes and checks the close frame.
func expectClose(t *testing.T, ctx context.Context, c *websocket.Conn, code websocket.StatusCode, reason string) {
	t.Helper()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("want close %d %q, got %v", code, reason, err)
		}
		if ce.Code != code || ce.Reason != reason {
			t.Fatalf("close %d %q, want %d %q", ce.Code, ce.Reason, code, reason)
		}
		return
	}
}

func echo(t *testing.T, ctx context.Context, c *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	if err := c.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	gotTyp, got, err := c.Read(ctx)
	if err != nil || gotTyp != typ || string(got) != msg {
		t.Fatalf("echo: %v %v %q, want %v %q", err, gotTyp, got, typ, msg)
	}
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var _ = fmt.Sprintf
