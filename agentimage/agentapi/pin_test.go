package agentapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi/agentapitest"
)

// victim is a listener on the host a replaced agent wants the gateway to reach (the Docker socket, Caddy's admin
// endpoint, cloud metadata): it counts every request it gets.
type victim struct {
	url  string // the URL the agent redirects to
	host string // its host:port
	hits atomic.Int32
}

func (v *victim) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.hits.Add(1)
		io.WriteString(w, `{"secret":"another tenant's files"}`)
	})
}

// hostSocketVictim listens on a UNIX socket of the host, named in a URL the way a SocketTransport spells sockets.
func hostSocketVictim(t *testing.T) *victim {
	t.Helper()
	v := &victim{}
	sock := agentapitest.ServeUnix(t, "docker.sock", v.handler())
	v.url = "http://" + socketHost(sock) + "/containers/other/archive?path=/workspace"
	return v
}

// loopbackVictim listens on a loopback TCP port of the host.
func loopbackVictim(t *testing.T) *victim {
	t.Helper()
	v := &victim{}
	srv := httptest.NewServer(v.handler())
	t.Cleanup(srv.Close)
	v.url, v.host = srv.URL+"/load", strings.TrimPrefix(srv.URL, "http://")
	return v
}

// redirectingAgent is a replaced agent: every request is answered with status and a Location of to. It listens
// on a UNIX socket (a network none sandbox's) or on loopback TCP, and returns its agent address.
func redirectingAgent(t *testing.T, overSocket bool, status int, to string) string {
	t.Helper()
	if !overSocket {
		return agentapitest.ServeTCP(t, agentapitest.Redirect(status, to))
	}
	return UnixAddr(agentapitest.ServeUnix(t, "agent.sock", agentapitest.Redirect(status, to)))
}

// A replaced agent that answers 302 or 307 to a host socket or a loopback listener gets a bad_reply error from
// every kind of agent client, and the listener sees no request: no redirect is followed, whatever the client's own
// redirect policy, and a 307 replays no body.
func TestAgentRedirectIsNeverFollowed(t *testing.T) {
	clients := map[string]func() *http.Client{
		// The Manager's pooled transport, under a client that would follow redirects if it were let.
		"pooled": func() *http.Client {
			tr := NewSocketTransport(&http.Transport{})
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr}
		},
		"per call":       func() *http.Client { return &http.Client{} },
		"default client": func() *http.Client { return nil },
	}
	calls := map[string]func(*Client) error{
		"exec": func(c *Client) error {
			_, err := c.Exec(context.Background(), ExecRequest{Cmd: "cat /etc/shadow"})
			return err
		},
		"read": func(c *Client) error {
			_, err := c.FSRead(context.Background(), ReadRequest{Path: "f"})
			return err
		},
		"download": func(c *Client) error {
			d, err := c.Download(context.Background(), "f", DownloadOptions{})
			if err == nil {
				d.Body.Close()
			}
			return err
		},
		"remove": func(c *Client) error { return c.FSRemove(context.Background(), RemoveRequest{Path: "f"}) },
	}
	for _, overSocket := range []bool{false, true} {
		for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			for vname, mk := range map[string]func(*testing.T) *victim{"host socket": hostSocketVictim, "loopback": loopbackVictim} {
				v := mk(t)
				addr := redirectingAgent(t, overSocket, status, v.url)
				for cname, hc := range clients {
					if overSocket && cname == "default client" {
						continue // a socket agent is never reached by a client without a transport of ours
					}
					for op, call := range calls {
						err := call(NewClientFor(addr, "tok", hc()))
						var ae *Error
						if !errors.As(err, &ae) || ae.Code != CodeBadReply || ae.Status() != http.StatusBadGateway || !errors.Is(err, ErrRedirect) {
							t.Errorf("socket=%v %d to %s, %s client, %s: err = %v; want bad_reply (502) matching ErrRedirect",
								overSocket, status, vname, cname, op, err)
						}
					}
				}
				if n := v.hits.Load(); n != 0 {
					t.Errorf("socket=%v %d: the %s listener got %d requests", overSocket, status, vname, n)
				}
			}
		}
	}
}

// A SocketTransport sends only requests pinned to the agent their URL names, dials only that agent, and refuses a
// request a redirect made even when the client would follow it: a raw client on the Manager's transport cannot
// be steered to a host address either.
func TestSocketTransportDialsOnlyThePinnedAgent(t *testing.T) {
	v := loopbackVictim(t)
	vs := hostSocketVictim(t)
	agent := redirectingAgent(t, false, http.StatusTemporaryRedirect, v.url)
	tr := NewSocketTransport(&http.Transport{})
	t.Cleanup(tr.CloseIdleConnections)
	raw := &http.Client{Transport: tr} // follows redirects: the transport must refuse them itself
	for _, tc := range []struct {
		name string
		ctx  context.Context
		url  string
	}{
		{"unpinned", context.Background(), v.url},
		{"pinned to another agent", PinAgent(context.Background(), agent), v.url},
		{"unpinned socket host", context.Background(), vs.url},
		{"socket host pinned to a TCP agent", PinAgent(context.Background(), agent), vs.url},
		{"redirect followed by the client", PinAgent(context.Background(), agent), "http://" + agent + "/v1/exec"},
	} {
		req, _ := http.NewRequestWithContext(tc.ctx, http.MethodPost, tc.url, strings.NewReader(`{"cmd":"x"}`))
		resp, err := raw.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %s", tc.name, resp.Status)
			continue
		}
		var ae *Error
		if !errors.As(err, &ae) || ae.Code != CodeBadReply {
			t.Errorf("%s: err = %v; want bad_reply", tc.name, err)
		}
	}
	// The transport itself dials nothing but the pinned agent, for whatever address it is asked.
	if _, err := tr.DialContext(PinAgent(context.Background(), agent), "tcp", v.host); !errors.Is(err, ErrNotPinned) {
		t.Errorf("dial of another address: err = %v; want ErrNotPinned", err)
	}
	if v.hits.Load() != 0 || vs.hits.Load() != 0 {
		t.Errorf("listeners got %d and %d requests", v.hits.Load(), vs.hits.Load())
	}
}

// An agent that answers a call whose reply is ignored with a body without end costs the gateway a bounded read:
// the call returns, and the connection is closed rather than drained.
func TestUnreadReplyIsBounded(t *testing.T) {
	handlerDone := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		var sent int64
		for {
			n, err := w.Write(chunk)
			sent += int64(n)
			if err != nil || sent > 1<<30 {
				handlerDone <- sent
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := NewSocketTransport(&http.Transport{})
	t.Cleanup(tr.CloseIdleConnections)
	if err := NewClientFor(strings.TrimPrefix(srv.URL, "http://"), "tok", &http.Client{Transport: tr}).FSRemove(ctx, RemoveRequest{Path: "f"}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if sent := <-handlerDone; sent > 1<<30 {
		t.Fatalf("the gateway read the agent's endless reply: %d bytes", sent)
	}
}

// A JSON reply over MaxReplyBytes is a too_large error, read no further than the bound.
func TestOversizeReplyIsTooLarge(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"path":"`)
		chunk := []byte(strings.Repeat("a", 64<<10))
		for sent.Load() < 4*MaxReplyBytes {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		io.WriteString(w, `"}`)
	}))
	t.Cleanup(srv.Close)
	_, err := NewClientFor(strings.TrimPrefix(srv.URL, "http://"), "tok", nil).FSStat(context.Background(), "f")
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeTooLarge || !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("err = %v; want too_large", err)
	}
}
