package caddymodule_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// e2bCodeReport is what testdata/e2b_sdk_code.cjs prints.
type e2bCodeReport struct {
	State struct {
		Text   string   `json:"text"`
		Stdout []string `json:"stdout"`
		Count  int      `json:"count"`
	} `json:"state"`
	Stream struct {
		Flagged bool   `json:"flagged"`
		Stdout  string `json:"stdout"`
	} `json:"stream"`
	Error struct {
		Name, Value, Traceback string
	} `json:"error"`
	PNG struct {
		Results int    `json:"results"`
		Magic   string `json:"magic"`
		Bytes   int    `json:"bytes"`
	} `json:"png"`
	Env struct {
		During, After string
	} `json:"env"`
	Contexts struct {
		SecondSeesX string `json:"secondSeesX"`
		FirstAgain  string `json:"firstAgain"`
		Cwd         string `json:"cwd"`
		Language    string `json:"language"`
		Listed      int    `json:"listed"`
		ListedAfter int    `json:"listedAfter"`
		Gone        string `json:"gone"`
	} `json:"contexts"`
	JS struct {
		Text, Stdout, State string
	} `json:"js"`
	Unsupported string `json:"unsupported"`
	Fatal       string `json:"fatal"`
}

// TestE2BSDKCodeInterpreter drives the real npm @e2b/code-interpreter SDK, unmodified, against Caddyfile.example:
// Sandbox.create on code-interpreter-v1 with sandbox-wide envs, state across cells, stdout streamed while the cell
// runs (the cell waits for a flag only a second context sets after the first line arrived), an exception with
// its traceback, a matplotlib PNG, env for one execution, a second context on /home/user (the workspace) with its
// own state, listed and removed, JavaScript with state, and an unsupported language refused.
func TestE2BSDKCodeInterpreter(t *testing.T) {
	_, env, _, _ := e2bExample(t)
	out, err := testenv.RunNode(t, filepath.Join("testdata", "e2b_sdk_code.cjs"), env...)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep e2bCodeReport
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	t.Logf("sdk report: %s", line)

	if rep.State.Text != "40" || strings.Join(rep.State.Stdout, "") != "doubling\n" || rep.State.Count != 2 {
		t.Errorf("state across cells: %+v", rep.State)
	}
	if !rep.Stream.Flagged || rep.Stream.Stdout != "first\nsecond\n" {
		t.Errorf("streamed stdout: %+v", rep.Stream)
	}
	if rep.Error.Name != "ValueError" || rep.Error.Value != "bad" || !strings.Contains(rep.Error.Traceback, "raise ValueError") {
		t.Errorf("exception: %+v", rep.Error)
	}
	if rep.PNG.Results != 1 || rep.PNG.Magic != "89504e47" || rep.PNG.Bytes < 1000 {
		t.Errorf("matplotlib PNG: %+v", rep.PNG)
	}
	if rep.Env.During != "('sandbox', 'once')" || rep.Env.After != "'gone'" {
		t.Errorf("env: %+v", rep.Env)
	}
	c := rep.Contexts
	if c.SecondSeesX != "NameError" || c.FirstAgain != "20" || c.Cwd != "'/workspace'" || c.Language != "python" ||
		c.Listed != c.ListedAfter+1 || !strings.HasPrefix(c.Gone, "NotFoundError") {
		t.Errorf("contexts: %+v", c)
	}
	if rep.JS.Text != "42" || rep.JS.Stdout != "from js\n" || rep.JS.State != "3" {
		t.Errorf("javascript: %+v", rep.JS)
	}
	if !strings.Contains(rep.Unsupported, "400") {
		t.Errorf("unsupported language: %q", rep.Unsupported)
	}
}
