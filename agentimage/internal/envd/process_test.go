package envd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
)

// collected is what a Start or Connect stream carried.
type collected struct {
	pid       uint32
	stdout    string
	stderr    string
	pty       string
	end       *pb.ProcessEvent_EndEvent
	keepalive int
	order     []string
}

func collect(t *testing.T, next func() bool, msg func() *pb.ProcessEvent, streamErr func() error) collected {
	t.Helper()
	var c collected
	for next() {
		ev := msg()
		switch e := ev.GetEvent().(type) {
		case *pb.ProcessEvent_Start:
			c.pid = e.Start.GetPid()
			c.order = append(c.order, "start")
		case *pb.ProcessEvent_Data:
			c.stdout += string(e.Data.GetStdout())
			c.stderr += string(e.Data.GetStderr())
			c.pty += string(e.Data.GetPty())
			c.order = append(c.order, "data")
		case *pb.ProcessEvent_End:
			c.end = e.End
			c.order = append(c.order, "end")
		case *pb.ProcessEvent_Keepalive:
			c.keepalive++
		}
	}
	if err := streamErr(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return c
}

func run(t *testing.T, te *testEnvd, req *connect.Request[pb.StartRequest]) collected {
	t.Helper()
	st, err := te.proc.Start(ctxFor(t), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return collect(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
}

func bash(cmd string) *pb.ProcessConfig {
	return &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}
}

func TestStartStreamsEventsInOrder(t *testing.T) {
	te := newTestEnvd(t)
	cases := []struct {
		name      string
		cmd       string
		envs      map[string]string
		sandbox   string
		wantOut   string
		wantErr   string
		wantExit  int32
		wantError string
	}{
		{name: "stdout", cmd: "echo hello", wantOut: "hello\n"},
		{name: "stderr and exit code", cmd: "echo oops >&2; exit 3", wantErr: "oops\n", wantExit: 3, wantError: "exit status 3"},
		{name: "home and user", cmd: `echo "$HOME $USER $(pwd)"`, wantOut: te.dir + " user " + te.dir + "\n"},
		{name: "sandbox env under request env", cmd: `echo "$A $B"`, sandbox: `{"A":"sbx","B":"sbx"}`, envs: map[string]string{"B": "req"}, wantOut: "sbx req\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bash(tc.cmd)
			cfg.Envs = tc.envs
			req := connect.NewRequest(&pb.StartRequest{Process: cfg, Stdin: new(bool)})
			if tc.sandbox != "" {
				req.Header().Set(agentapi.E2BEnvHeader, tc.sandbox)
			}
			c := run(t, te, req)
			if c.order[0] != "start" || c.order[len(c.order)-1] != "end" || c.pid == 0 {
				t.Fatalf("events %v pid %d", c.order, c.pid)
			}
			if c.stdout != tc.wantOut || c.stderr != tc.wantErr {
				t.Fatalf("stdout %q stderr %q", c.stdout, c.stderr)
			}
			if c.end.GetExitCode() != tc.wantExit || !c.end.GetExited() || c.end.GetError() != tc.wantError {
				t.Fatalf("end %+v", c.end)
			}
		})
	}
}

func TestStartUsersAndCwd(t *testing.T) {
	te := newTestEnvd(t)
	for _, tc := range []struct {
		name, user, cwd string
		want            connect.Code
	}{
		{"root is refused", "root", "", connect.CodePermissionDenied},
		{"unknown user", "alice", "", connect.CodeUnauthenticated},
		{"missing cwd", "user", "/home/user/nope", connect.CodeInvalidArgument},
		{"missing cwd outside the workspace", "user", "/nope", connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bash("true")
			if tc.cwd != "" {
				cfg.Cwd = &tc.cwd
			}
			st, err := te.proc.Start(ctxFor(t), asUser(connect.NewRequest(&pb.StartRequest{Process: cfg}), tc.user))
			if err == nil {
				for st.Receive() {
				}
				err = st.Err()
			}
			wantCode(t, err, tc.want)
		})
	}
	// the sandbox account's own name and E2B's "user" both run, in the home by default or a relative cwd
	writeFile(t, te.dir+"/sub/x", "")
	cwd := "sub"
	c := run(t, te, asUser(connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "pwd", Cwd: &cwd}}), "sandbox"))
	if c.stdout != te.dir+"/sub\n" {
		t.Fatalf("pwd %q", c.stdout)
	}
	// a process may work anywhere it could cd to (E2B code uses /tmp); file paths stay confined
	tmp := os.TempDir()
	if c := run(t, te, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "pwd", Cwd: &tmp}})); c.stdout != tmp+"\n" {
		t.Fatalf("pwd in %s: %q", tmp, c.stdout)
	}
}

// TestStreamWireFormat checks the bytes E2B's SDK depends on: application/connect+json, enveloped messages with
// start first, and the 0x02 end-of-stream envelope, which also carries a stream's error with HTTP 200.
func TestStreamWireFormat(t *testing.T) {
	te := newTestEnvd(t)
	post := func(body string) (*http.Response, []envelope) {
		var buf bytes.Buffer
		buf.WriteByte(0)
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(body)))
		buf.WriteString(body)
		req, _ := http.NewRequest(http.MethodPost, te.url+"/process.Process/Start", &buf)
		req.Header.Set("Content-Type", "application/connect+json")
		req.Header.Set("Connect-Protocol-Version", "1")
		resp := mustDo(t, req)
		raw, _ := io.ReadAll(resp.Body)
		envs, err := parseEnvelopes(raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp, envs
	}
	resp, envs := post(`{"process":{"cmd":"/bin/bash","args":["-c","echo hi"]},"stdin":false}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// protojson varies its whitespace on purpose: compare decoded JSON
	var first, last struct {
		Event map[string]map[string]any `json:"event"`
	}
	if len(envs) < 3 || envs[len(envs)-1].flags != 2 || string(envs[len(envs)-1].data) != "{}" ||
		json.Unmarshal(envs[0].data, &first) != nil || first.Event["start"]["pid"] == nil {
		t.Fatalf("envelopes %+v", envs)
	}
	if json.Unmarshal(envs[len(envs)-2].data, &last) != nil || last.Event["end"]["exited"] != true || last.Event["end"]["status"] != "exit status 0" {
		t.Fatalf("end %s", envs[len(envs)-2].data)
	}
	resp, envs = post(`{"process":{"cmd":"/bin/bash","cwd":"/home/user/nope"}}`)
	if resp.StatusCode != 200 || len(envs) != 1 || envs[0].flags != 2 {
		t.Fatalf("%d %+v", resp.StatusCode, envs)
	}
	var end struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(envs[0].data, &end); err != nil || end.Error.Code != "invalid_argument" || !strings.Contains(end.Error.Message, "does not exist") {
		t.Fatalf("%v %s", err, envs[0].data)
	}
}

type envelope struct {
	flags byte
	data  []byte
}

// parseEnvelopes splits a Connect stream body into its envelopes.
func parseEnvelopes(b []byte) ([]envelope, error) {
	var out []envelope
	for len(b) > 0 {
		if len(b) < 5 {
			return nil, io.ErrUnexpectedEOF
		}
		n := binary.BigEndian.Uint32(b[1:5])
		if uint32(len(b)-5) < n {
			return nil, io.ErrUnexpectedEOF
		}
		out = append(out, envelope{flags: b[0], data: b[5 : 5+n]})
		b = b[5+n:]
	}
	return out, nil
}

// TestHomeAlias: when the image links /home/user to the workspace (HomeAlias), processes see the workspace by that
// name: HOME, the default cwd and relative cwds, while paths stay confined through the real directory.
func TestHomeAlias(t *testing.T) {
	te := newTestEnvd(t)
	alias := t.TempDir() + "/home-user"
	if err := os.Symlink(te.dir, alias); err != nil {
		t.Fatal(err)
	}
	te.svc.d.HomeAlias = alias
	writeFile(t, te.dir+"/sub/f", "")
	for _, tc := range []struct{ cwd, want string }{{"", alias + "|" + alias}, {"sub", alias + "|" + alias + "/sub"}, {"/home/user/sub", alias + "|" + alias + "/sub"}} {
		cfg := bash(`echo "$HOME|$(pwd)"`)
		if tc.cwd != "" {
			cfg.Cwd = &tc.cwd
		}
		if c := run(t, te, connect.NewRequest(&pb.StartRequest{Process: cfg})); c.stdout != tc.want+"\n" {
			t.Fatalf("cwd %q: %q, want %q", tc.cwd, c.stdout, tc.want)
		}
	}
}
