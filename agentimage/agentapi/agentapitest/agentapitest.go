// Package agentapitest holds what tests on both sides of the agent's wire need to stand up a replaced (hostile)
// agent or a host service it aims at: HTTP servers on loopback TCP or on a UNIX socket, and a handler that answers
// every request with a redirect. It imports nothing of the gateway and not agentapi itself, so agentapi's own
// in-package tests use it too; callers spell a socket as an agent address with agentapi.UnixAddr.
package agentapitest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// Redirect answers every request with status and a Location of to, after reading the body (so a client that
// would follow a 307 has sent it all).
func Redirect(status int, to string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Location", to)
		w.WriteHeader(status)
	})
}

// Healthy answers the readiness probe (GET /health) as a ready agent does and hands every other request to h: an
// agent that passed the Manager's probe when its sandbox started and was replaced afterwards.
func Healthy(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeTCP serves h on a loopback port until the test ends and returns its host:port.
func ServeTCP(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// ServeUnix serves h on a UNIX socket named name in a directory of the test's until the test ends, and returns
// the socket's path.
func ServeUnix(t testing.TB, name string, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), name)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}
