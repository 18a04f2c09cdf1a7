package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// execdCall is one request to the agent's execd API with the sandbox's token.
func execdCall(t *testing.T, sb *testenv.Sandbox, method, path string, body io.Reader, contentType string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, sb.URL+agentapi.ExecdPrefix+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(agentapi.TokenHeader, sb.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func execdEvents(t *testing.T, body []byte) []agentapi.ExecdEvent {
	t.Helper()
	var evs []agentapi.ExecdEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		var ev agentapi.ExecdEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		if ev.Type != agentapi.ExecdEventPing {
			evs = append(evs, ev)
		}
	}
	return evs
}

func execdWantError(t *testing.T, status int, body []byte, wantStatus int, code string) {
	t.Helper()
	var e agentapi.ExecdError
	if json.Unmarshal(body, &e) != nil || status != wantStatus || e.Code != code {
		t.Fatalf("want %d %s, got %d %s", wantStatus, code, status, body)
	}
}

// TestExecdAPI drives the execd API of the real agent in our hardened image (read-only root, non-root user, HOME
// on a tmpfs): commands, package-mirror files in HOME, line reads, the typed refusals and the cgroup's metrics.
func TestExecdAPI(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Memory: "768m"})

	t.Run("token required", func(t *testing.T) {
		resp, err := http.Get(sb.URL + agentapi.ExecdPrefix + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("ping without token: %d", resp.StatusCode)
		}
		if status, _, _ := execdCall(t, sb, "GET", "/ping", nil, ""); status != http.StatusOK {
			t.Fatalf("ping: %d", status)
		}
	})

	t.Run("command", func(t *testing.T) {
		req := `{"command":"echo \"$HOME $GREETING\"; pwd; echo oops >&2; exit 4","cwd":"~","envs":{"GREETING":"hi"},"timeout":60000}`
		status, h, body := execdCall(t, sb, "POST", "/command", strings.NewReader(req), "application/json")
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %s", status, body)
		}
		evs := execdEvents(t, body)
		var stdout, stderr []string
		for _, ev := range evs {
			switch ev.Type {
			case agentapi.ExecdEventStdout:
				stdout = append(stdout, ev.Text)
			case agentapi.ExecdEventStderr:
				stderr = append(stderr, ev.Text)
			}
		}
		// stdout and stderr are two pipes: only the order within each is defined
		end := evs[len(evs)-1]
		if evs[0].Type != agentapi.ExecdEventInit || strings.Join(stdout, "|") != "/home/sandbox hi|/home/sandbox" ||
			strings.Join(stderr, "|") != "oops" || end.Type != agentapi.ExecdEventErr || end.Error.EValue != "4" {
			t.Fatalf("events %+v", evs)
		}
	})

	// A working directory is not a file API: any directory the sandbox user can enter is one (FastGPT's provider runs
	// commands in /tmp), one it cannot enter is refused, and the file routes stay confined (next subtest).
	t.Run("working directory", func(t *testing.T) {
		cases := []struct {
			cwd, want string
			status    int
			code      string
		}{
			{"/tmp", "/tmp", http.StatusOK, ""},
			{"/", "/", http.StatusOK, ""},
			{"", "/workspace", http.StatusOK, ""},
			{"/root", "", http.StatusForbidden, agentapi.ExecdCodePathNotAllowed},
			{"/no/such/dir", "", http.StatusNotFound, agentapi.ExecdCodeFileNotFound},
			{"/etc/passwd", "", http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest},
		}
		for _, tc := range cases {
			req := fmt.Sprintf(`{"command":"pwd","cwd":%q,"timeout":60000}`, tc.cwd)
			status, _, body := execdCall(t, sb, "POST", "/command", strings.NewReader(req), "application/json")
			if status != tc.status {
				t.Fatalf("cwd %q: %d %s, want %d", tc.cwd, status, body, tc.status)
			}
			if tc.status != http.StatusOK {
				if !strings.Contains(string(body), tc.code) {
					t.Fatalf("cwd %q: %s, want code %s", tc.cwd, body, tc.code)
				}
				continue
			}
			var out []string
			for _, ev := range execdEvents(t, body) {
				if ev.Type == agentapi.ExecdEventStdout {
					out = append(out, ev.Text)
				}
			}
			if strings.Join(out, "|") != tc.want {
				t.Fatalf("cwd %q: pwd printed %q, want %q", tc.cwd, out, tc.want)
			}
		}
	})

	t.Run("background logs", func(t *testing.T) {
		_, _, body := execdCall(t, sb, "POST", "/command", strings.NewReader(`{"command":"echo a; echo b >&2","background":true}`), "application/json")
		evs := execdEvents(t, body)
		if len(evs) != 2 || evs[1].Type != agentapi.ExecdEventComplete {
			t.Fatalf("%+v", evs)
		}
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			status, _, body := execdCall(t, sb, "GET", "/command/status/"+evs[0].Text, nil, "")
			if strings.Contains(string(body), `"running":false`) {
				break
			}
			if status != http.StatusOK || time.Now().After(deadline) {
				t.Fatalf("status %d %s", status, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		status, h, logs := execdCall(t, sb, "GET", "/command/"+evs[0].Text+"/logs?cursor=0", nil, "")
		if status != http.StatusOK || string(logs) != "a\nb\n" || h.Get(agentapi.ExecdTailCursorHeader) != "4" {
			t.Fatalf("logs %d %q cursor %q", status, logs, h.Get(agentapi.ExecdTailCursorHeader))
		}
	})

	t.Run("files in workspace and home", func(t *testing.T) {
		upload := func(meta, content string) (int, []byte) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			pw, _ := mw.CreateFormFile("metadata", "metadata")
			pw.Write([]byte(meta))
			fw, _ := mw.CreateFormFile("file", "f")
			fw.Write([]byte(content))
			mw.Close()
			status, _, body := execdCall(t, sb, "POST", "/files/upload", &buf, mw.FormDataContentType())
			return status, body
		}
		if status, body := upload(`{"path":"/home/sandbox/.pip/pip.conf","mode":600}`, "[global]\nindex-url = http://mirror/simple\n"); status != http.StatusOK {
			t.Fatalf("upload to home: %d %s", status, body)
		}
		if got := sb.Exec(t, "stat", "-c", "%a %U", "/home/sandbox/.pip/pip.conf"); strings.TrimSpace(got) != "600 sandbox" {
			t.Fatalf("home file: %q", got)
		}
		if status, body := upload(`{"path":"/workspace/notes.txt"}`, "l1\r\nl2\nl3\n"); status != http.StatusOK {
			t.Fatalf("upload: %d %s", status, body)
		}
		status, _, body := execdCall(t, sb, "GET", "/files/download?path=/workspace/notes.txt&offset=2&limit=2", nil, "")
		if status != http.StatusOK || string(body) != "l2\nl3" {
			t.Fatalf("lines: %d %q", status, body)
		}
		status, _, body = execdCall(t, sb, "GET", "/files/info?path=/workspace/notes.txt&path=/workspace/missing", nil, "")
		execdWantError(t, status, body, http.StatusNotFound, agentapi.ExecdCodeFileNotFound)
		status, _, body = execdCall(t, sb, "GET", "/files/download?path=/etc/passwd", nil, "")
		execdWantError(t, status, body, http.StatusForbidden, agentapi.ExecdCodePathNotAllowed)
		status, body = upload(`{"path":"/tmp/x"}`, "x")
		execdWantError(t, status, body, http.StatusForbidden, agentapi.ExecdCodePathNotAllowed)
		status, _, body = execdCall(t, sb, "GET", "/directories/list?path=/home/sandbox&depth=2", nil, "")
		if status != http.StatusOK || !strings.Contains(string(body), `"path":"/home/sandbox/.pip/pip.conf"`) {
			t.Fatalf("list home: %d %s", status, body)
		}
	})

	t.Run("metrics are the sandbox's", func(t *testing.T) {
		status, _, body := execdCall(t, sb, "GET", "/metrics", nil, "")
		var m agentapi.ExecdMetrics
		if err := json.Unmarshal(body, &m); err != nil || status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		if m.MemTotalMiB != 768 || m.MemUsedMiB <= 0 || m.MemUsedMiB >= 768 || m.CPUCount <= 0 {
			t.Fatalf("metrics %+v (want the 768 MiB limit)", m)
		}
	})
}

// TestExecdSDK drives the agent's execd API with the real npm SDK (@alibaba-group/opensandbox), its execd client
// pointed straight at the agent in our image: every command, file and directory call the SDK has.
func TestExecdSDK(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{})
	script := filepath.Join(testenv.RepoRoot(), "agentimage", "testdata", "execd_sdk.cjs")
	out, err := testenv.RunNode(t, script, "AGENT="+sb.URL, "TOKEN="+sb.Token)
	if err != nil {
		t.Fatalf("SDK client: %v\n%s", err, out)
	}
	_, res, ok := strings.Cut(out, "OK ")
	if !ok {
		t.Fatalf("SDK client printed no result:\n%s", out)
	}
	var r struct {
		Missing, Outside, OutsideInfo, Deleted struct {
			Code   string
			Status int
		}
		TimeoutError string
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res)), &r); err != nil {
		t.Fatalf("result %q: %v", res, err)
	}
	if r.Missing.Code != agentapi.ExecdCodeFileNotFound || r.Missing.Status != 404 || r.Deleted.Code != agentapi.ExecdCodeFileNotFound {
		t.Fatalf("a missing path: %+v %+v", r.Missing, r.Deleted)
	}
	// readFile's errors carry the status only (the SDK does not parse download error bodies)
	if r.Outside.Status != 403 || r.OutsideInfo.Code != agentapi.ExecdCodePathNotAllowed || r.OutsideInfo.Status != 403 {
		t.Fatalf("a path outside: %+v %+v", r.Outside, r.OutsideInfo)
	}
	if !strings.Contains(r.TimeoutError, "timed out") {
		t.Fatalf("timeout traceback %q", r.TimeoutError)
	}
}
