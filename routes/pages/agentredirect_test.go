package pages

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/agentapi/agentapitest"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
	"github.com/sandgate/sandgate/sandboxes/service"
	"github.com/sandgate/sandgate/tickets"
)

// TestTerminalSessionRefusesAgentRedirect: the terminal page's agent calls (list and create PTY sessions) on a
// replaced agent that redirects to a host socket or a loopback listener answer 502 bad_reply, and the listener
// sees no request, with the default client and with the Manager's pooled transport under a client that would
// follow redirects.
func TestTerminalSessionRefusesAgentRedirect(t *testing.T) {
	var hits atomic.Int32
	victim := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		agentapi.WriteJSON(w, http.StatusCreated, agentapi.PTYSession{ID: "p1"})
	})
	loopURL := "http://" + agentapitest.ServeTCP(t, victim)
	sock := agentapitest.ServeUnix(t, "admin.sock", victim)
	sockURL, _ := agentapi.BaseURL(agentapi.UnixAddr(sock), &http.Client{Transport: &agentapi.SocketTransport{}})

	clients := map[string]func() *http.Client{
		"default": func() *http.Client { return nil },
		"pooled": func() *http.Client {
			tr := agentapi.NewSocketTransport(&http.Transport{})
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr}
		},
	}
	for _, to := range []string{loopURL + "/v1/pty", sockURL + "/v1/pty"} {
		for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			agent := agentapitest.ServeTCP(t, agentapitest.Healthy(agentapitest.Redirect(status, to)))
			for cname, hc := range clients {
				var id string
				f := newFixtureWith(t, builtAssets(), func(c *Config, _ *sandboxes.Manager) {
					// The real Manager, its sandbox's agent at the redirecting server.
					m, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: []sandboxes.Profile{{ID: "base", Image: "img",
						Capabilities: []string{sandboxes.CapShell}}}})
					engine.AgentAddr = agent
					sb, err := m.Create(t.Context(), sandboxes.CreateRequest{Owner: "alice", Profile: "base"})
					if err != nil {
						t.Fatal(err)
					}
					id = sb.ID
					agents := service.NewAgentClient(hc())
					c.Service = service.New(service.Config{Sandboxes: m, Agent: agents, Streamer: agents})
				})
				session := terminalSession(t, f, id)
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					r := httptest.NewRequest(method, "https://gw.test/sandboxes/"+id+"/terminal/session?pty=p1", strings.NewReader(`{}`))
					r.AddCookie(session)
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Origin", "https://gw.test")
					w := f.do(t, r)
					var env agentapi.Envelope
					_ = json.Unmarshal(w.Body.Bytes(), &env)
					if w.Code != http.StatusBadGateway || env.Error == nil || env.Error.Code != agentapi.CodeBadReply || w.Header().Get("Location") != "" {
						t.Errorf("%d to %s, %s client, %s: %d %s; want 502 bad_reply", status, to, cname, method, w.Code, w.Body)
					}
				}
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host listeners got %d requests", n)
	}
}

// terminalSession spends a write ticket for sandbox id's terminal and returns its session cookie.
func terminalSession(t *testing.T, f *fixture, id string) *http.Cookie {
	t.Helper()
	tok := f.ticket(t, id, tickets.KindTerminal, tickets.PermWrite)
	w := f.do(t, httptest.NewRequest("GET", "https://gw.test/sandboxes/"+id+"/terminal/?ticket="+tok, nil))
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cookies) == 0 {
		t.Fatalf("ticket: %d", w.Code)
	}
	return cookies[len(cookies)-1]
}
