package sandboxes

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// firstConnListener hands out one already accepted connection, then the listener's own.
type firstConnListener struct {
	net.Listener
	first net.Conn
	once  sync.Once
}

func (l *firstConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.first })
	if c != nil {
		return c, nil
	}
	return l.Listener.Accept()
}

// An agent that binds its port before its set-up signals readiness over the probe's own connection: the probe
// connects while nothing serves yet, waits, and is answered once the agent serves, on that one connection.
func TestReadinessSignalledOverTheProbeConnection(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() { done <- m.waitHealthy(context.Background(), ln.Addr().String(), time.Minute) }()
	// The probe's connection, accepted by the kernel while the agent is not serving yet.
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go srv.Serve(&firstConnListener{Listener: ln, first: first})
	defer srv.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the probe was not answered once the agent served")
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the agent saw %d connections, want the probe's one", n)
	}
}

// Before the agent's process binds its port the probe is refused; it tries again and finds the agent once it
// listens.
func TestReadinessAfterRefusedConnections(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("p")}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	done := make(chan error, 1)
	go func() { done <- m.waitHealthy(context.Background(), addr, time.Minute) }()
	var ln2 net.Listener
	waitFor(t, func() bool {
		ln2, err = net.Listen("tcp", addr)
		return err == nil
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })}
	go srv.Serve(ln2)
	defer srv.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNotListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, refused := net.Dial("tcp", addr)
	_, missing := net.Dial("unix", t.TempDir()+"/agent.sock")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", refused, true},
		{"no socket file", missing, true},
		{"timeout", context.DeadlineExceeded, false},
	} {
		if got := notListening(c.err); got != c.want {
			t.Errorf("%s: notListening(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// The first call after a warm claim reuses the connection the readiness probe opened: no new dial, one round trip.
func TestClaimFirstCallReusesTheProbeConnection(t *testing.T) {
	m, target, n := claimWithCountedAgent(t, func(n *atomic.Int32) string {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"status":"ok"}`))
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	})
	req, _ := http.NewRequestWithContext(agentapi.PinAgent(context.Background(), target.Addr), http.MethodPost,
		"http://"+target.Addr+"/v1/exec", strings.NewReader(`{"argv":["true"]}`))
	resp, err := m.AgentHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	drainClose(resp)
	if got := n.Load(); got != 1 {
		t.Fatalf("the first call after the claim dialled again: %d connections", got)
	}
}

// An agent behind a UNIX socket (network none) is pooled like a TCP one: the first call after a warm claim, made
// the way the API makes it, reuses the connection the readiness probe opened over the socket.
func TestClaimFirstCallReusesTheProbeSocketConnection(t *testing.T) {
	m, target, n := claimWithCountedAgent(t, func(n *atomic.Int32) string {
		// A short directory: the socket path must fit sun_path.
		dir, err := os.MkdirTemp("", "sgs")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "agent.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte(`{"status":"ok"}`))
			}),
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					n.Add(1)
				}
			},
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return agentapi.UnixAddr(sock)
	})
	if _, err := agentapi.NewClientFor(target.Addr, target.Token, m.AgentHTTPClient()).Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("the first call after the claim dialled the socket again: %d connections", got)
	}
}

// claimWithCountedAgent claims the one warm member of a pool whose agents serve(n) starts (each counting the
// connections it accepts in n) and checks that, once ready, its agent has seen exactly the readiness probe's.
func claimWithCountedAgent(t *testing.T, serve func(n *atomic.Int32) string) (*Manager, Target, *atomic.Int32) {
	t.Helper()
	d := newFakeDriver(t)
	var mu sync.Mutex
	conns := map[string]*atomic.Int32{}
	d.agentFor = func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		n := &atomic.Int32{}
		conns[id] = n
		return serve(n)
	}
	p := testProfile("p")
	p.WarmPoolSize = 1
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{p}})
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.LaunchType != LaunchWarm {
		t.Fatalf("not a warm claim: %s", sb.LaunchType)
	}
	target := mustReady(t, m, sb.ID)
	m.mu.RLock()
	cid := m.entries[sb.ID].rec.ContainerID
	m.mu.RUnlock()
	mu.Lock()
	n := conns[cid]
	mu.Unlock()
	if got := n.Load(); got != 1 {
		t.Fatalf("before the first call the agent saw %d connections, want the probe's 1", got)
	}
	return m, target, n
}
