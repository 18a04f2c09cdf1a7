package execd_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestRunCommand(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		req        agentapi.ExecdRunCommand
		stdout     []string
		stderr     []string
		exit       string // "" for execution_complete
		tracebackS string
	}{
		{name: "lines", req: agentapi.ExecdRunCommand{Command: `printf 'a\nb\n\nc'; echo err >&2`},
			stdout: []string{"a", "b", "\n", "c"}, stderr: []string{"err"}},
		{name: "carriage returns end lines", req: agentapi.ExecdRunCommand{Command: `printf 'x\r\ny\rz\n'`},
			stdout: []string{"x", "y", "z"}, stderr: []string{}},
		{name: "exit code", req: agentapi.ExecdRunCommand{Command: "echo out; exit 3"},
			stdout: []string{"out"}, stderr: []string{}, exit: "3", tracebackS: "exit status 3"},
		{name: "cwd and envs", req: agentapi.ExecdRunCommand{Command: `echo "$(pwd) $GREETING"`, Cwd: "sub", Envs: map[string]string{"GREETING": "hi"}},
			stdout: []string{filepath.Join(e.workspace, "sub") + " hi"}, stderr: []string{}},
		{name: "cwd in home by tilde", req: agentapi.ExecdRunCommand{Command: "pwd", Cwd: "~"},
			stdout: []string{e.home}, stderr: []string{}},
		{name: "timeout", req: agentapi.ExecdRunCommand{Command: "echo started; sleep 30", TimeoutMS: 300},
			stdout: []string{"started"}, stderr: []string{}, exit: "143", tracebackS: "timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := e.run(tc.req)
			if evs[0].Type != agentapi.ExecdEventInit || !strings.HasPrefix(evs[0].Text, "proc_") || evs[0].Timestamp == 0 {
				t.Fatalf("first event %+v", evs[0])
			}
			if got := texts(evs, agentapi.ExecdEventStdout); !slices.Equal(got, tc.stdout) {
				t.Fatalf("stdout %q, want %q", got, tc.stdout)
			}
			if got := texts(evs, agentapi.ExecdEventStderr); !slices.Equal(got, tc.stderr) {
				t.Fatalf("stderr %q, want %q", got, tc.stderr)
			}
			end := last(evs)
			switch {
			case tc.exit == "" && end.Type != agentapi.ExecdEventComplete:
				t.Fatalf("want execution_complete, got %+v", end)
			case tc.exit != "" && (end.Type != agentapi.ExecdEventErr || end.Error == nil || end.Error.EValue != tc.exit ||
				end.Error.EName != agentapi.ExecdErrorNameExec || !strings.Contains(strings.Join(end.Error.Traceback, " "), tc.tracebackS)):
				t.Fatalf("want error %s (%s), got %+v %+v", tc.exit, tc.tracebackS, end, end.Error)
			}
			status, body := e.json(http.MethodGet, "/command/status/"+evs[0].Text, nil)
			var st agentapi.ExecdCommandStatus
			if err := json.Unmarshal(body, &st); err != nil || status != http.StatusOK || st.Running || st.ExitCode == nil ||
				st.FinishedAt == nil || st.Content != tc.req.Command || st.ID != evs[0].Text {
				t.Fatalf("status %d %s", status, body)
			}
			if want := tc.exit; want != "" && strconv.Itoa(*st.ExitCode) != want {
				t.Fatalf("status exit %d, want %s", *st.ExitCode, want)
			}
		})
	}
}

func TestRunCommandPings(t *testing.T) {
	e := newEnv(t)
	// The command waits for a file the test writes once it has read a ping from the stream.
	resp, err := http.Post(e.url+"/command", "application/json", strings.NewReader(`{"command":"while [ ! -e go ]; do sleep 0.05; done; echo done"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var types []string
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		var ev agentapi.ExecdEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		types = append(types, ev.Type)
		if ev.Type == agentapi.ExecdEventPing && ev.Text == agentapi.ExecdPingText && !slices.Contains(types[:len(types)-1], agentapi.ExecdEventPing) {
			if err := os.WriteFile(filepath.Join(e.workspace, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(types) < 4 || types[0] != agentapi.ExecdEventInit || types[len(types)-1] != agentapi.ExecdEventComplete ||
		!slices.Contains(types, agentapi.ExecdEventStdout) {
		t.Fatalf("events %v", types)
	}
}

func TestRunCommandRefusals(t *testing.T) {
	e := newEnv(t)
	other := uint32(os.Getuid() + 1)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"no command", agentapi.ExecdRunCommand{}, 400, agentapi.ExecdCodeInvalidRequest},
		{"not json", "{", 400, agentapi.ExecdCodeInvalidRequest},
		{"negative timeout", agentapi.ExecdRunCommand{Command: "true", TimeoutMS: -1}, 400, agentapi.ExecdCodeInvalidRequest},
		{"cwd missing", agentapi.ExecdRunCommand{Command: "true", Cwd: "nope"}, 404, agentapi.ExecdCodeFileNotFound},
		{"cwd missing outside", agentapi.ExecdRunCommand{Command: "true", Cwd: "/no/such/dir"}, 404, agentapi.ExecdCodeFileNotFound},
		{"cwd a file", agentapi.ExecdRunCommand{Command: "true", Cwd: "/etc/passwd"}, 400, agentapi.ExecdCodeInvalidRequest},
		{"cwd undefined variable", agentapi.ExecdRunCommand{Command: "true", Cwd: "$SANDGATE_NO_SUCH_VAR/x"}, 400, agentapi.ExecdCodeInvalidRequest},
		{"other uid", agentapi.ExecdRunCommand{Command: "true", UID: &other}, 400, agentapi.ExecdCodeNotSupported},
		{"bad env name", agentapi.ExecdRunCommand{Command: "true", Envs: map[string]string{"A=B": "x"}}, 400, agentapi.ExecdCodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var status int
			var body []byte
			if s, ok := tc.body.(string); ok {
				status, _, body = e.do(http.MethodPost, "/command", strings.NewReader(s), nil)
			} else {
				status, body = e.json(http.MethodPost, "/command", tc.body)
			}
			wantError(t, status, body, tc.status, tc.code)
		})
	}
}

// A command's working directory is not confined to the workspace as the file routes are (execd's own behaviour):
// a relative one is taken from the workspace, an absolute one anywhere the sandbox user can enter.
func TestRunCommandWorkingDirectory(t *testing.T) {
	e := newEnv(t)
	if err := os.Mkdir(filepath.Join(e.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for _, tc := range []struct{ cwd, want string }{
		{"", e.workspace},
		{"sub", filepath.Join(e.workspace, "sub")},
		{tmp, tmp},
		{"/", "/"},
	} {
		var out []string
		for _, ev := range e.run(agentapi.ExecdRunCommand{Command: "pwd -P", Cwd: tc.cwd}) {
			if ev.Type == agentapi.ExecdEventStdout {
				out = append(out, ev.Text)
			}
		}
		want, _ := filepath.EvalSymlinks(tc.want)
		if strings.Join(out, "") != want {
			t.Errorf("cwd %q: pwd printed %q, want %q", tc.cwd, out, want)
		}
	}
}

func TestBackgroundCommandLogsAndInterrupt(t *testing.T) {
	e := newEnv(t)
	fifo := filepath.Join(e.workspace, "go")
	evs := e.run(agentapi.ExecdRunCommand{Command: `echo one; echo two >&2; while [ ! -e go ]; do sleep 0.05; done; echo three; sleep 60`, Background: true})
	if len(evs) != 2 || evs[0].Type != agentapi.ExecdEventInit || evs[1].Type != agentapi.ExecdEventComplete {
		t.Fatalf("background events %+v", evs)
	}
	id := evs[0].Text
	logs := func(cursor string) (string, string) {
		t.Helper()
		path := "/command/" + id + "/logs"
		if cursor != "" {
			path += "?cursor=" + cursor
		}
		status, h, body := e.do(http.MethodGet, path, nil, nil)
		if status != http.StatusOK {
			t.Fatalf("logs: %d %s", status, body)
		}
		return string(body), h.Get(agentapi.ExecdTailCursorHeader)
	}
	// wait for the first two lines (combined, in write order)
	var out, cursor string
	for deadline := time.Now().Add(time.Minute); ; {
		out, cursor = logs("")
		if out == "one\ntwo\n" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out != "one\ntwo\n" || cursor != "8" {
		t.Fatalf("logs %q cursor %q", out, cursor)
	}
	if err := os.WriteFile(fifo, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		out, cursor = logs("8")
		if out == "three\n" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out != "three\n" || cursor != "14" {
		t.Fatalf("logs from 8: %q cursor %q", out, cursor)
	}
	status, body := e.json(http.MethodGet, "/command/status/"+id, nil)
	if !strings.Contains(string(body), `"running":true`) || status != http.StatusOK {
		t.Fatalf("status %d %s", status, body)
	}
	status, body = e.json(http.MethodDelete, "/command?id="+id, nil)
	if status != http.StatusOK || len(body) != 0 {
		t.Fatalf("interrupt: %d %s", status, body)
	}
	status, body = e.json(http.MethodGet, "/command/status/"+id, nil)
	var st agentapi.ExecdCommandStatus
	if err := json.Unmarshal(body, &st); err != nil || st.Running || st.ExitCode == nil || !strings.Contains(st.Error, "interrupted") {
		t.Fatalf("status after interrupt %d %s", status, body)
	}

	t.Run("refusals", func(t *testing.T) {
		status, body := e.json(http.MethodDelete, "/command?id="+id, nil)
		wantError(t, status, body, http.StatusConflict, agentapi.ExecdCodeRuntimeError)
		status, body = e.json(http.MethodDelete, "/command", nil)
		wantError(t, status, body, http.StatusBadRequest, agentapi.ExecdCodeMissingQuery)
		status, body = e.json(http.MethodDelete, "/command?id=proc_nope", nil)
		wantError(t, status, body, http.StatusNotFound, agentapi.ExecdCodeRuntimeError)
		status, body = e.json(http.MethodGet, "/command/status/proc_nope", nil)
		wantError(t, status, body, http.StatusNotFound, agentapi.ExecdCodeInvalidRequest)
		status, body = e.json(http.MethodGet, "/command/"+id+"/logs?cursor=-1", nil)
		wantError(t, status, body, http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest)
		fg := e.run(agentapi.ExecdRunCommand{Command: "true"})
		status, body = e.json(http.MethodGet, "/command/"+fg[0].Text+"/logs", nil)
		wantError(t, status, body, http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest)
	})
}

func TestPingAndMetrics(t *testing.T) {
	e := newEnv(t)
	if status, _, body := e.do(http.MethodGet, "/ping", nil, nil); status != http.StatusOK || len(body) != 0 {
		t.Fatalf("ping %d %q", status, body)
	}
	status, body := e.json(http.MethodGet, "/metrics", nil)
	var m agentapi.ExecdMetrics
	if err := json.Unmarshal(body, &m); err != nil || status != http.StatusOK || m.CPUCount <= 0 || m.MemTotalMiB <= 0 ||
		m.MemUsedMiB <= 0 || m.MemUsedMiB > m.MemTotalMiB || m.CPUUsedPct < 0 || m.CPUUsedPct > 100 || m.Timestamp == 0 {
		t.Fatalf("metrics %d %s", status, body)
	}
}
