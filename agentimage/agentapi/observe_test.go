package agentapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// Observe's done runs once, when the call is over: at the body's end or close, on a failed round trip, and at
// once for a switched protocol (whose body must stay the connection, an io.ReadWriteCloser).
func TestSocketTransportObserveEndsOncePerCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upgrade" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "test")
			w.WriteHeader(http.StatusSwitchingProtocols)
			return
		}
		io.WriteString(w, "body")
	}))
	defer srv.Close()
	tests := []struct {
		name string
		url  string
		// use acts on the response (nil after a failed round trip) and checks done was not called too early.
		use func(t *testing.T, resp *http.Response, done *atomic.Int32)
	}{
		{name: "read to the end", url: srv.URL + "/x", use: func(t *testing.T, resp *http.Response, done *atomic.Int32) {
			if done.Load() != 0 {
				t.Fatal("done before the body was read")
			}
			io.ReadAll(resp.Body)
			if done.Load() != 1 {
				t.Fatal("not done at the body's end")
			}
			resp.Body.Close()
		}},
		{name: "closed unread", url: srv.URL + "/x", use: func(t *testing.T, resp *http.Response, done *atomic.Int32) {
			resp.Body.Close()
		}},
		{name: "failed round trip", url: "http://127.0.0.1:1/x", use: func(*testing.T, *http.Response, *atomic.Int32) {}},
		{name: "switched protocols", url: srv.URL + "/upgrade", use: func(t *testing.T, resp *http.Response, done *atomic.Int32) {
			if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
				t.Fatal("a switched connection's body lost its write side")
			}
			resp.Body.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var started, done atomic.Int32
			tr := NewSocketTransport(&http.Transport{})
			defer tr.CloseIdleConnections()
			tr.Observe = func(*http.Request) func() {
				started.Add(1)
				return func() { done.Add(1) }
			}
			u, _ := url.Parse(tt.url)
			req, _ := http.NewRequestWithContext(PinAgent(context.Background(), u.Host), http.MethodGet, tt.url, nil)
			if strings.HasSuffix(tt.url, "/upgrade") {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "test")
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err == nil {
				tt.use(t, resp, &done)
			}
			if started.Load() != 1 || done.Load() != 1 {
				t.Fatalf("started %d, done %d; want 1, 1", started.Load(), done.Load())
			}
		})
	}
}
