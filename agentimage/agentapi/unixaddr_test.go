package agentapi

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
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
