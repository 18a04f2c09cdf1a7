package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// e2bLine is one NDJSON line of the code interpreter's /execute.
type e2bLine map[string]any

// e2bExecute posts body to the agent's /e2b/code/execute with the agent token and returns the status and lines,
// handing each line to each as it arrives.
func e2bExecute(t *testing.T, sb *testenv.Sandbox, hdr http.Header, body string, each func(e2bLine)) (int, []e2bLine) {
	t.Helper()
	req, err := sb.Request(context.Background(), http.MethodPost, agentapi.E2BCodePrefix+"/execute", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Logf("%d: %s", resp.StatusCode, raw)
		return resp.StatusCode, nil
	}
	var lines []e2bLine
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l e2bLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Bytes())
		}
		if each != nil {
			each(l)
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 || lines[len(lines)-1]["type"] != "end_of_execution" {
		t.Fatalf("the stream does not end with end_of_execution: %v", lines)
	}
	return resp.StatusCode, lines
}

// ofType returns the lines of one type, and the joined text of stdout or stderr lines.
func ofType(lines []e2bLine, typ string) ([]e2bLine, string) {
	var out []e2bLine
	var text strings.Builder
	for _, l := range lines {
		if l["type"] == typ {
			out = append(out, l)
			s, _ := l["text"].(string)
			text.WriteString(s)
		}
	}
	return out, text.String()
}

// TestE2BCodeInterpreter runs the agent's E2B code interpreter in the base image: Python state and streaming,
// a matplotlib PNG, an exception, env for one execution and the sandbox-wide env, contexts on the workspace,
// JavaScript, and the agent token.
func TestE2BCodeInterpreter(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell", "python"}})

	t.Run("state and main result", func(t *testing.T) {
		e2bExecute(t, sb, nil, `{"code":"x = 20"}`, nil)
		_, lines := e2bExecute(t, sb, nil, `{"code":"print('doubling')\nx * 2"}`, nil)
		results, _ := ofType(lines, "result")
		_, stdout := ofType(lines, "stdout")
		counts, _ := ofType(lines, "number_of_executions")
		if len(results) != 1 || results[0]["text"] != "40" || results[0]["is_main_result"] != true || stdout != "doubling\n" ||
			len(counts) != 1 || counts[0]["execution_count"] != 2.0 {
			t.Fatalf("%v", lines)
		}
	})

	t.Run("stdout streams before the cell ends", func(t *testing.T) {
		// The cell waits until the test has seen its first line and created the flag file through the agent's
		// own exec, so the line cannot have come with the end of the cell.
		code := "import os, time\nprint('first', flush=True)\nfor _ in range(3000):\n    if os.path.exists('/tmp/e2b-flag'): break\n    time.sleep(0.01)\nprint('second')"
		body, _ := json.Marshal(map[string]string{"code": code})
		seen := false
		_, lines := e2bExecute(t, sb, nil, string(body), func(l e2bLine) {
			if l["type"] == "stdout" && !seen {
				seen = true
				sb.Exec(t, "touch", "/tmp/e2b-flag")
			}
		})
		if _, stdout := ofType(lines, "stdout"); !seen || stdout != "first\nsecond\n" {
			t.Fatalf("%v", lines)
		}
	})

	t.Run("matplotlib PNG", func(t *testing.T) {
		body, _ := json.Marshal(map[string]string{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"})
		_, lines := e2bExecute(t, sb, nil, string(body), nil)
		results, _ := ofType(lines, "result")
		if len(results) != 1 || results[0]["is_main_result"] != false {
			t.Fatalf("%v", lines)
		}
		raw, err := base64.StdEncoding.DecodeString(results[0]["png"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if img, err := png.Decode(bytes.NewReader(raw)); err != nil || img.Bounds().Dx() < 100 {
			t.Fatalf("not a PNG figure: %v", err)
		}
	})

	t.Run("exception", func(t *testing.T) {
		_, lines := e2bExecute(t, sb, nil, `{"code":"def f():\n    raise ValueError('bad')\nf()"}`, nil)
		errs, _ := ofType(lines, "error")
		if len(errs) != 1 || errs[0]["name"] != "ValueError" || errs[0]["value"] != "bad" || !strings.Contains(errs[0]["traceback"].(string), "raise ValueError") {
			t.Fatalf("%v", lines)
		}
	})

	t.Run("env for one execution and the sandbox-wide env", func(t *testing.T) {
		_, lines := e2bExecute(t, sb, nil, `{"code":"import os; os.environ['ONE']","env_vars":{"ONE":"once"}}`, nil)
		if r, _ := ofType(lines, "result"); len(r) != 1 || r[0]["text"] != "'once'" {
			t.Fatalf("%v", lines)
		}
		_, lines = e2bExecute(t, sb, nil, `{"code":"os.environ.get('ONE', 'gone')"}`, nil)
		if r, _ := ofType(lines, "result"); len(r) != 1 || r[0]["text"] != "'gone'" {
			t.Fatalf("%v", lines)
		}
		// The header applies to the contexts created with it: a new JavaScript default context here.
		hdr := http.Header{agentapi.E2BEnvHeader: {`{"WIDE":"sandbox"}`}}
		_, lines = e2bExecute(t, sb, hdr, `{"code":"process.env.WIDE","language":"js"}`, nil)
		if r, _ := ofType(lines, "result"); len(r) != 1 || r[0]["text"] != "'sandbox'" {
			t.Fatalf("%v", lines)
		}
	})

	t.Run("context on the workspace", func(t *testing.T) {
		var c struct{ ID, Language, Cwd string }
		if e := callJSON(t, sb, http.MethodPost, agentapi.E2BCodePrefix+"/contexts", nil, map[string]string{"language": "python"}, &c); e != nil || c.Cwd != "/home/user" {
			t.Fatalf("%v %+v", e, c)
		}
		body, _ := json.Marshal(map[string]string{"code": "open('made-by-e2b.txt', 'w').write('hi')\nimport os; os.getcwd()", "context_id": c.ID})
		_, lines := e2bExecute(t, sb, nil, string(body), nil)
		if r, _ := ofType(lines, "result"); len(r) != 1 || r[0]["text"] != "'/workspace'" {
			t.Fatalf("%v", lines)
		}
		if out := sb.Exec(t, "cat", "/workspace/made-by-e2b.txt"); out != "hi" {
			t.Fatalf("file in the workspace: %q", out)
		}
		var list []struct{ ID string }
		if e := callJSON(t, sb, http.MethodGet, agentapi.E2BCodePrefix+"/contexts", nil, nil, &list); e != nil || len(list) != 3 {
			t.Fatalf("%v %+v", e, list)
		}
		if e := callJSON(t, sb, http.MethodDelete, agentapi.E2BCodePrefix+"/contexts/"+c.ID, nil, nil, nil); e != nil {
			t.Fatal(e)
		}
	})

	t.Run("R is refused where the image has none", func(t *testing.T) {
		e := callJSON(t, sb, http.MethodPost, agentapi.E2BCodePrefix+"/contexts", nil, map[string]string{"language": "r"}, nil)
		if e == nil || e.Code != agentapi.CodeNotSupported || !strings.Contains(e.Message, "sandgate/sandbox:r") {
			t.Fatalf("%+v", e)
		}
	})

	t.Run("the agent token is required", func(t *testing.T) {
		resp, err := http.Post(sb.URL+agentapi.E2BCodePrefix+"/execute", "application/json", strings.NewReader(`{"code":"1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("without the token: %d", resp.StatusCode)
		}
	})
}

// TestE2BCodeInterpreterR runs an R context in the r image: state across cells (R prints its values to stdout), an
// R error, and env for one execution.
func TestE2BCodeInterpreterR(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "r", Capabilities: []string{"shell"}})
	e2bExecute(t, sb, nil, `{"code":"x <- 41","language":"r"}`, nil)
	_, lines := e2bExecute(t, sb, nil, `{"code":"x + 1","language":"r"}`, nil)
	if _, stdout := ofType(lines, "stdout"); !strings.Contains(stdout, "42") {
		t.Fatalf("state: %v", lines)
	}
	_, lines = e2bExecute(t, sb, nil, `{"code":"stop('bad')","language":"r"}`, nil)
	if errs, _ := ofType(lines, "error"); len(errs) != 1 || !strings.Contains(errs[0]["value"].(string), "bad") {
		t.Fatalf("error: %v", lines)
	}
	_, lines = e2bExecute(t, sb, nil, `{"code":"cat(Sys.getenv('ONE'))","language":"r","env_vars":{"ONE":"once"}}`, nil)
	if _, stdout := ofType(lines, "stdout"); stdout != "once" {
		t.Fatalf("env: %v", lines)
	}
	_, lines = e2bExecute(t, sb, nil, `{"code":"cat(Sys.getenv('ONE', 'gone'))","language":"r"}`, nil)
	if _, stdout := ofType(lines, "stdout"); stdout != "gone" {
		t.Fatalf("env after: %v", lines)
	}
}
