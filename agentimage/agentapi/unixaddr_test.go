package agentapi

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct {
		addr string
		path string
		ok   bool
	}{
		{"10.0.0.5:7777", "", false},
		{"unix//run/sandgate/x/agent.sock", "/run/sandgate/x/agent.sock", true},
		{"unix/relative.sock", "", false},
	} {
		path, ok := SocketPath(tc.addr)
		if ok != tc.ok || (ok && path != tc.path) {
			t.Errorf("SocketPath(%q) = %q, %v; want %q, %v", tc.addr, path, ok, tc.path, tc.ok)
		}
	}
}

func TestClientOverUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(TokenHeader) != "tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		WriteJSON(w, http.StatusOK, Info{SandboxID: "sb1"})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	base, _ := BaseURL("10.0.0.5:7777", nil)
	if base != "http://10.0.0.5:7777" {
		t.Fatalf("TCP base URL = %q", base)
	}
	info, err := NewClientFor(UnixAddr(sock), "tok", &http.Client{}).Info(context.Background())
	if err != nil {
		t.Fatalf("Info over the socket: %v", err)
	}
	if info.SandboxID != "sb1" {
		t.Fatalf("info = %+v", info)
	}
}

func TestSocketHostRoundTrip(t *testing.T) {
	long := "/" + strings.Repeat("s", maxSocketPath-1)
	for _, path := range []string{"/a.sock", "/run/sandgate/ns/sb-1/agent.sock", long} {
		host := socketHost(path)
		for _, label := range strings.Split(host, ".") {
			if len(label) > 63 {
				t.Errorf("socketHost(%q) has a label of %d bytes", path, len(label))
			}
		}
		got, ok, err := socketFromHost(host)
		if err != nil || !ok || got != path {
			t.Errorf("socketFromHost(socketHost(%q)) = %q, %v, %v", path, got, ok, err)
		}
	}
}

func TestSocketFromHostRefusesWhatIsNoSocket(t *testing.T) {
	for _, tc := range []struct {
		host    string
		isSock  bool
		wantErr bool
	}{
		{"10.0.0.5", false, false},
		{"sandbox", false, false},
		{"zz" + socketHostSuffix, true, true}, // not hex
		{hex.EncodeToString([]byte("relative.sock")) + socketHostSuffix, true, true}, // not absolute
		{hex.EncodeToString([]byte("/a\x00b")) + socketHostSuffix, true, true},       // NUL
		{socketHost("/" + strings.Repeat("s", maxSocketPath)), true, true},           // over sun_path
		{socketHostSuffix, true, true},                                               // empty
	} {
		_, isSock, err := socketFromHost(tc.host)
		var hostErr *SocketHostError
		if isSock != tc.isSock || (err != nil) != tc.wantErr || (err != nil && !errors.As(err, &hostErr)) {
			t.Errorf("socketFromHost(%q) = _, %v, %v; want %v, error %v", tc.host, isSock, err, tc.isSock, tc.wantErr)
		}
	}
}

func FuzzSocketFromHost(f *testing.F) {
	for _, seed := range []string{"10.0.0.5", socketHost("/run/x/agent.sock"), "zz" + socketHostSuffix, socketHostSuffix, "..sock.invalid"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, host string) {
		path, isSock, err := socketFromHost(host)
		if !isSock || err != nil {
			return
		}
		if !strings.HasPrefix(path, "/") || len(path) > maxSocketPath || strings.IndexByte(path, 0) >= 0 {
			t.Fatalf("socketFromHost(%q) accepted %q", host, path)
		}
	})
}

// countingSocket serves HTTP on a fresh UNIX socket and counts the connections it accepts.
func countingSocket(t *testing.T, name string) (string, *atomic.Int32) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, http.StatusOK, Info{SandboxID: name}) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, &n
}

// A client on a SocketTransport keeps one connection per socket: later calls to the same agent reuse it, and each
// socket has its own, so a call never reaches another sandbox's agent.
func TestSocketTransportKeepsOneConnectionPerSocket(t *testing.T) {
	sockA, connsA := countingSocket(t, "a")
	sockB, connsB := countingSocket(t, "b")
	tr := NewSocketTransport(&http.Transport{})
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	ctx := context.Background()
	for range 3 {
		for sock, want := range map[string]string{sockA: "a", sockB: "b"} {
			info, err := NewClientFor(UnixAddr(sock), "tok", hc).Info(ctx)
			if err != nil {
				t.Fatalf("Info over %s: %v", sock, err)
			}
			if info.SandboxID != want {
				t.Fatalf("a call to %s reached agent %q", want, info.SandboxID)
			}
		}
	}
	if a, b := connsA.Load(), connsB.Load(); a != 1 || b != 1 {
		t.Fatalf("connections accepted: a %d, b %d; want one each", a, b)
	}
	// A client on any other transport still dials per call and keeps nothing.
	for range 2 {
		if _, err := NewClientFor(UnixAddr(sockA), "tok", &http.Client{}).Info(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a := connsA.Load(); a != 3 {
		t.Fatalf("per-call clients made %d connections in all, want 3", a)
	}
}

// TCP addresses go through the transport's own dialer.
func TestSocketTransportDialsTCPAsBefore(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, http.StatusOK, Info{SandboxID: "tcp"}) }))
	t.Cleanup(srv.Close)
	var dials atomic.Int32
	var d net.Dialer
	tr := NewSocketTransport(&http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}})
	t.Cleanup(tr.CloseIdleConnections)
	info, err := NewClientFor(strings.TrimPrefix(srv.URL, "http://"), "tok", &http.Client{Transport: tr}).Info(context.Background())
	if err != nil || info.SandboxID != "tcp" {
		t.Fatalf("Info over TCP: %+v, %v", info, err)
	}
	if dials.Load() != 1 {
		t.Fatalf("the transport's own dialer ran %d times, want 1", dials.Load())
	}
}
