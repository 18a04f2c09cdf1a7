package portproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func upstream(t *testing.T) int {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err == nil {
			_ = c.Write(r.Context(), typ, append([]byte("echo:"), msg...))
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{
			"path": r.URL.Path, "query": r.URL.RawQuery, "prefix": r.Header.Get("X-Forwarded-Prefix"),
			"token": r.Header.Get(agentapi.TokenHeader), "auth": r.Header.Get("Authorization"), "host": r.Host,
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	port, _ := strconv.Atoi(strings.TrimPrefix(srv.URL, "http://127.0.0.1:"))
	return port
}

func TestProxy(t *testing.T) {
	up := upstream(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()

	mux := http.NewServeMux()
	New(Config{Token: agentapi.TokenCheckFor("tok"), Reserved: map[int]string{9222: "use /cdp"}}).Register(mux)
	front := httptest.NewServer(mux)
	defer front.Close()

	tests := []struct {
		name, path, auth string
		prefix           []string // X-Forwarded-Prefix from a gateway in front
		status           int
		code             string
		want             map[string]string
	}{
		{name: "strip", path: fmt.Sprintf("/proxy/%d/a/b?x=1&access_token=tok", up), auth: "Bearer tok", status: 200,
			want: map[string]string{"path": "/a/b", "query": "x=1", "prefix": fmt.Sprintf("/proxy/%d", up), "token": "", "auth": "", "host": fmt.Sprintf("127.0.0.1:%d", up)}},
		{name: "gateway prefix is the whole prefix", path: fmt.Sprintf("/proxy/%d/a", up), prefix: []string{"/sandboxes/sandbox-0123456789ab/app/3000/"}, status: 200,
			want: map[string]string{"path": "/a", "prefix": "/sandboxes/sandbox-0123456789ab/app/3000"}},
		{name: "subdomain gateway sends an empty prefix", path: fmt.Sprintf("/proxy/%d/a", up), prefix: []string{""}, status: 200,
			want: map[string]string{"path": "/a", "prefix": ""}},
		{name: "app auth kept", path: fmt.Sprintf("/proxy/%d/", up), auth: "Bearer app-secret", status: 200,
			want: map[string]string{"path": "/", "auth": "Bearer app-secret"}},
		{name: "absproxy keeps prefix", path: fmt.Sprintf("/absproxy/%d/a", up), status: 200,
			want: map[string]string{"path": fmt.Sprintf("/absproxy/%d/a", up), "prefix": ""}},
		{name: "nothing listening", path: fmt.Sprintf("/proxy/%d/", closed), status: 502, code: agentapi.CodeUpstreamUnavailable},
		{name: "reserved", path: "/proxy/9222/json", status: 403, code: agentapi.CodePortNotAllowed},
		{name: "zero", path: "/proxy/0/", status: 400, code: agentapi.CodeInvalidRequest},
		{name: "too big", path: "/proxy/65536/", status: 400, code: agentapi.CodeInvalidRequest},
		{name: "leading zero", path: "/proxy/080/", status: 400, code: agentapi.CodeInvalidRequest},
		{name: "no slash redirects", path: fmt.Sprintf("/proxy/%d?q=1", up), status: http.StatusPermanentRedirect},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, front.URL+tc.path, nil)
			req.Header.Set(agentapi.TokenHeader, "tok")
			if tc.prefix != nil {
				req.Header["X-Forwarded-Prefix"] = tc.prefix
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusPermanentRedirect {
				if loc := resp.Header.Get("Location"); loc != fmt.Sprintf("%d/?q=1", up) {
					t.Fatalf("Location %q", loc)
				}
				return
			}
			if tc.code != "" {
				if e := agentapi.ReadError(resp, body); e.Code != tc.code {
					t.Fatalf("code %q, want %q", e.Code, tc.code)
				}
				return
			}
			var got map[string]string
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}

	t.Run("websocket", func(t *testing.T) {
		u, _ := url.Parse(front.URL)
		c, _, err := websocket.Dial(context.Background(), fmt.Sprintf("ws://%s/proxy/%d/ws", u.Host, up),
			&websocket.DialOptions{HTTPHeader: http.Header{agentapi.TokenHeader: {"tok"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := c.Write(context.Background(), websocket.MessageText, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		_, msg, err := c.Read(context.Background())
		if err != nil || string(msg) != "echo:hi" {
			t.Fatalf("%v %q", err, msg)
		}
	})
}
