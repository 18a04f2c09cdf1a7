package bayapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// streamingAgent answers the agent's streaming routes as the agent does (agentapi's wire types), for the service's
// real agent client, and records what the gateway sent it.
type streamingAgent struct {
	mu     sync.Mutex
	since  string
	signal string
	pty    agentapi.PTYCreateRequest
}

func (f *streamingAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sse := func(events string) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events)
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health": // the Manager's readiness probe
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/exec":
		var req agentapi.ExecRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		sse("event: start\nid: 0:0\ndata: {\"id\":\"p1\"}\n\nevent: stdout\nid: 2:0\ndata: {\"data\":\"" + req.Cmd + "\"}\n\nevent: end\ndata: {}\n\n")
	case r.Method == http.MethodGet && r.URL.Path == "/v1/processes":
		_ = json.NewEncoder(w).Encode(agentapi.ProcessList{Processes: []agentapi.ExecResult{{ID: "p1", Status: "running"}}})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/processes/p1/events":
		f.since = r.URL.Query().Get(agentapi.QuerySince)
		sse("event: end\ndata: {}\n\n")
	case r.Method == http.MethodPost && r.URL.Path == "/v1/processes/p1/signal":
		var req agentapi.SignalRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.signal = req.Signal
		_, _ = io.WriteString(w, "{}")
	case r.Method == http.MethodPost && r.URL.Path == "/v1/pty":
		_ = json.NewDecoder(r.Body).Decode(&f.pty)
		_ = json.NewEncoder(w).Encode(agentapi.PTYSession{ID: "pty-1", Cols: f.pty.Cols, Rows: f.pty.Rows, Status: "running"})
	default:
		http.NotFound(w, r)
	}
}

func TestStreamingAdditions(t *testing.T) {
	fs := &streamingAgent{}
	agent := httptest.NewServer(fs)
	t.Cleanup(agent.Close)
	a := newTestAPI(t, func(c *testConfig) { c.svc.Streamer = service.NewAgentClient(nil) })
	a.engine.AgentAddr = strings.TrimPrefix(agent.URL, "http://") // every container the engine starts runs this agent
	id := a.create(t, keyAlice, nil)
	S := a.srv.URL + "/v1/sandboxes/" + id

	req, _ := http.NewRequest("POST", S+"/shell/exec/stream", strings.NewReader(`{"command":"echo hi","cwd":"sub"}`))
	req.Header.Set("Authorization", "Bearer "+keyAlice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(body), `"data":"echo hi"`) {
		t.Errorf("stream: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if st, out, _ := a.call(t, "GET", "/v1/sandboxes/"+id+"/processes", keyAlice, nil); st != 200 || len(out["processes"].([]any)) != 1 {
		t.Errorf("processes: %d %v", st, out)
	}
	req, _ = http.NewRequest("GET", S+"/processes/p1/output", nil)
	req.Header.Set("Authorization", "Bearer "+keyAlice)
	req.Header.Set("Last-Event-ID", "2:0")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || fs.since != "2:0" {
		t.Errorf("resume: %d since=%q", resp.StatusCode, fs.since)
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes/"+id+"/processes/p1/output?since=x", keyAlice, nil); st != 422 {
		t.Errorf("bad cursor: %d", st)
	}
	if st, _, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/processes/p1/signal", keyAlice, map[string]any{"signal": "sigkill"}); st != 200 || fs.signal != "KILL" {
		t.Errorf("signal: %d %q", st, fs.signal)
	}
	if st, _, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/processes/p1/signal", keyAlice, map[string]any{"signal": "BOOM"}); st != 422 {
		t.Errorf("bad signal: %d", st)
	}
	st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/pty", keyAlice, map[string]any{"cols": 100, "rows": 30, "cwd": "proj"})
	if st != 201 || out["id"] != "pty-1" || fs.pty.Cols != 100 || fs.pty.Cwd != "proj" {
		t.Errorf("pty: %d %v %+v", st, out, fs.pty)
	}
	if st, out, _ := a.call(t, "POST", "/v1/sandboxes/"+id+"/pty", keyAlice, map[string]any{"cwd": "/etc"}); st != 400 || errCode(out) != "invalid_path" {
		t.Errorf("pty absolute cwd: %d %v", st, out)
	}
	if st, _, _ := a.call(t, "GET", "/v1/sandboxes/"+id+"/processes", keyBob, nil); st != 404 {
		t.Errorf("bob lists alice's processes: %d", st)
	}
}
