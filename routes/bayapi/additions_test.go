package bayapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

type fakeStreamer struct {
	since  string
	signal string
	pty    service.PTYRequest
}

func (f *fakeStreamer) ExecStream(_ context.Context, _ sandboxes.Target, req service.ExecRequest) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("event: start\nid: 0:0\ndata: {\"id\":\"p1\"}\n\nevent: stdout\nid: 2:0\ndata: {\"data\":\"" + req.Command + "\"}\n\nevent: end\ndata: {}\n\n")), nil
}

func (f *fakeStreamer) Processes(context.Context, sandboxes.Target) (json.RawMessage, error) {
	return json.RawMessage(`{"processes":[{"id":"p1","status":"running"}]}`), nil
}

func (f *fakeStreamer) ProcessOutput(_ context.Context, _ sandboxes.Target, _ string, since string) (io.ReadCloser, error) {
	f.since = since
	return io.NopCloser(strings.NewReader("event: end\ndata: {}\n\n")), nil
}

func (f *fakeStreamer) Signal(_ context.Context, _ sandboxes.Target, _, signal string) error {
	f.signal = signal
	return nil
}

func (f *fakeStreamer) CreatePTY(_ context.Context, _ sandboxes.Target, req service.PTYRequest) (json.RawMessage, error) {
	f.pty = req
	return json.RawMessage(`{"id":"pty-1","ws_path":"/v1/pty/pty-1/ws"}`), nil
}

func TestStreamingAdditions(t *testing.T) {
	fs := &fakeStreamer{}
	a := newTestAPI(t, func(c *testConfig) { c.svc.Streamer = fs })
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
