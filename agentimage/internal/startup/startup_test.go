package startup

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/mirrors"
)

func TestValidateDependencies(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    agentapi.Dependencies
		ok   bool
	}{
		{"plain", agentapi.Dependencies{Python: map[string]string{"requests": "2.31.0", "numpy": "", "pandas": ">=2,<3", "uvicorn[standard]": "*"}, Node: map[string]string{"lodash": "^4.17.21", "@types/node": "20"}}, true},
		{"option injection", agentapi.Dependencies{Python: map[string]string{"--index-url=http://evil": ""}}, false},
		{"url as name", agentapi.Dependencies{Python: map[string]string{"git+https://x/y": ""}}, false},
		{"shell in version", agentapi.Dependencies{Python: map[string]string{"six": "1; rm -rf /"}}, false},
		{"node path", agentapi.Dependencies{Node: map[string]string{"../x": ""}}, false},
		{"node file spec", agentapi.Dependencies{Node: map[string]string{"x": "file:/etc"}}, false},
		{"node uppercase", agentapi.Dependencies{Node: map[string]string{"Lodash": ""}}, false},
		{"apt ok", agentapi.Dependencies{Apt: []string{"libpq-dev", "g++", "curl=7.88.1-10"}}, true},
		{"apt option", agentapi.Dependencies{Apt: []string{"-o=APT::x"}}, false},
		{"r ok", agentapi.Dependencies{R: map[string]string{"data.table": "1.14.8", "R6": ">=2.5", "Rcpp": "==1.0-10", "x1": "*", "jsonlite": ""}}, true},
		{"r code in name", agentapi.Dependencies{R: map[string]string{"a);system('id');(": ""}}, false},
		{"r option as name", agentapi.Dependencies{R: map[string]string{"--repos": ""}}, false},
		{"r name ends with dot", agentapi.Dependencies{R: map[string]string{"abc.": ""}}, false},
		{"r one letter", agentapi.Dependencies{R: map[string]string{"a": ""}}, false},
		{"r version with space", agentapi.Dependencies{R: map[string]string{"R6": ">= 2.5"}}, false},
		{"r version range", agentapi.Dependencies{R: map[string]string{"R6": ">=2,<3"}}, false},
		{"r version url", agentapi.Dependencies{R: map[string]string{"R6": "https://x/R6.tar.gz"}}, false},
	} {
		if err := tc.d.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if got := pythonRequirements(map[string]string{"b": "1.0", "a": ">=2", "c": ""}); strings.Join(got, " ") != "a>=2 b==1.0 c" {
		t.Fatalf("requirements %v", got)
	}
	if got := nodePackages(map[string]string{"b": "^1", "a": ""}); strings.Join(got, " ") != "a b@^1" {
		t.Fatalf("packages %v", got)
	}
	if got := rPackages(map[string]string{"R6": ">=2.5", "data.table": "*", "abc": ""}); strings.Join(got, "|") != "R6|>=2.5|abc||data.table|" {
		t.Fatalf("r packages %q", got)
	}
}

// TestPathsEnviron: the dependency directories come first, an inherited value stays after them, and an inherited
// value that is ours already (the r image sets R_LIBS_USER to the workspace library) is not repeated.
func TestPathsEnviron(t *testing.T) {
	p := PathsFor("/ws")
	t.Setenv("R_LIBS_USER", "/ws/.r-library")
	t.Setenv("NODE_PATH", "/opt/sandgate/node/node_modules")
	env := p.Environ()
	if env["R_LIBS_USER"] != "/ws/.r-library" || env["NODE_PATH"] != "/ws/.sandgate/node/node_modules:/opt/sandgate/node/node_modules" {
		t.Fatalf("%v", env)
	}
	t.Setenv("R_LIBS_USER", "/usr/local/lib/R/mine")
	if got := p.Environ()["R_LIBS_USER"]; got != "/ws/.r-library:/usr/local/lib/R/mine" {
		t.Fatalf("R_LIBS_USER %q", got)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(agentapi.EnvInit, `["echo hi"]`)
	t.Setenv(agentapi.EnvServices, `[{"name":"web","command":"python3 -m http.server 8000","port":8000}]`)
	t.Setenv(agentapi.EnvDependencies, `{"python":{"six":"1.16.0"}}`)
	t.Setenv(agentapi.EnvMirrors, `{"npm_registry":"https://npm.example/","cran_mirror":"https://cran.example/"}`)
	c, err := ConfigFromEnv("/home/x", "/ws")
	if err != nil || len(c.Init) != 1 || c.Services[0].Restart != agentapi.RestartAlways || c.Dependencies.Python["six"] != "1.16.0" || c.Mirrors.NPMRegistry == "" || c.Mirrors.CRANMirror != "https://cran.example/" {
		t.Fatalf("%+v %v", c, err)
	}
	for name, bad := range map[string]string{
		agentapi.EnvInit:         `["ok", "  "]`,
		agentapi.EnvServices:     `[{"name":"x"}]`,
		agentapi.EnvDependencies: `{"ruby":{"x":"1"}}`,
		agentapi.EnvMirrors:      `{"npm_registry":"javascript:alert(1)"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := ConfigFromEnv("/home/x", "/ws"); err == nil {
				t.Fatalf("%s=%s accepted", name, bad)
			}
		})
	}
}

// FastGPT's package-mirror variables (the IDE agent's environment) are the mirrors when SANDGATE's own are unset,
// and the start-up sequence writes their files.
func TestFastGPTMirrorEnv(t *testing.T) {
	t.Setenv(mirrors.EnvNPMRegistry, " https://npm.example/ ")
	t.Setenv(mirrors.EnvPyPIIndex, "http://pypi.example:8080/simple")
	home := t.TempDir()
	c, err := ConfigFromEnv(home, t.TempDir())
	if err != nil || c.Mirrors != (agentapi.Mirrors{NPMRegistry: "https://npm.example/", PyPIIndexURL: "http://pypi.example:8080/simple"}) {
		t.Fatalf("%+v %v", c.Mirrors, err)
	}
	New(c, nil, slog.New(slog.DiscardHandler)).Run(context.Background())
	for path, want := range map[string]string{
		".npmrc":             "registry=https://npm.example/\n",
		".config/uv/uv.toml": "default-index = \"http://pypi.example:8080/simple\"\nallow-insecure-host = [\"pypi.example\"]\n",
	} {
		if b, err := os.ReadFile(filepath.Join(home, path)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", path, b, err, want)
		}
	}
}

func health(t *testing.T, s *Startup) (int, agentapi.Health) {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		agentapi.WriteJSON(w, 200, agentapi.Health{Status: "ok"})
	})
	rec := httptest.NewRecorder()
	s.GateHealth(ok, "v").ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	var b agentapi.Health
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	return rec.Code, b
}

func TestRunInitAndHealth(t *testing.T) {
	ws := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	s := New(Config{Home: t.TempDir(), Workspace: ws, Init: []string{"echo one > a.txt", "cat a.txt; echo two >> a.txt"}}, nil, log)
	if code, b := health(t, s); code != 503 || b.Status != "starting" {
		t.Fatalf("before run: %d %+v", code, b)
	}
	s.Run(context.Background())
	if code, b := health(t, s); code != 200 || b.Status != "ok" {
		t.Fatalf("after run: %d %+v", code, b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\ntwo\n" {
		t.Fatalf("init effect %q", b)
	}
	l := s.Log()
	if len(l.Steps) != 2 || l.Steps[1].Output != "one\n" {
		t.Fatalf("log %+v", l)
	}
}

func TestRunFailures(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"init fails", Config{Init: []string{"true", "echo 'no such table' >&2; exit 4", "touch never"}}, "init command 2 (echo 'no such table' >&2; exit 4) failed: exit 4: no such table"},
		{"apt refused", Config{Dependencies: agentapi.Dependencies{Apt: []string{"curl"}}}, "make profile-images"},
		{"no npm", Config{Dependencies: agentapi.Dependencies{Node: map[string]string{"lodash": ""}}}, "needs npm"},
		{"no R", Config{Dependencies: agentapi.Dependencies{R: map[string]string{"R6": ""}}}, "needs Rscript, which this image does not have (use the sandgate/sandbox:r image)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Home, tc.cfg.Workspace = t.TempDir(), t.TempDir()
			if tc.name == "no npm" || tc.name == "no R" {
				t.Setenv("PATH", t.TempDir())
			}
			s := New(tc.cfg, nil, log)
			s.Run(context.Background())
			code, b := health(t, s)
			if code != 503 || b.Status != "failed" || !strings.Contains(b.Error, tc.want) {
				t.Fatalf("%d %+v, want error containing %q", code, b, tc.want)
			}
			if _, err := os.Stat(filepath.Join(tc.cfg.Workspace, "never")); err == nil {
				t.Fatal("a command after the failure ran")
			}
		})
	}
	// A configuration error fails at once.
	s := New(Config{}, os.ErrInvalid, log)
	if code, b := health(t, s); code != 503 || b.Status != "failed" {
		t.Fatalf("config error: %d %+v", code, b)
	}
}

func TestLimitedBufferKeepsTheEnd(t *testing.T) {
	var b limitedBuffer
	b.Write([]byte(strings.Repeat("x", outputLimit)))
	b.Write([]byte("the reason\n"))
	if s := b.String(); !strings.HasSuffix(s, "the reason\n") || !strings.HasPrefix(s, "[earlier output dropped]") {
		t.Fatalf("tail lost: %q", s[len(s)-20:])
	}
}

// TestRDependenciesStep: the R step hands rdeps.R the workspace library, the repository (the profile's cran_mirror,
// else CRAN's) and the packages as name/version pairs; R's reasons end up in /health; a success is remembered, so a
// restart does not run R again. Rscript here is a stand-in script: the real one runs in TestRDependenciesAtCreate.
func TestRDependenciesStep(t *testing.T) {
	bin := t.TempDir()
	argsFile := filepath.Join(t.TempDir(), "args")
	fake := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + argsFile + "\n" +
		"if [ -n \"$FAIL\" ]; then echo 'R package R6: version 2.5.1 does not satisfy >=9' >&2; exit 1; fi\n"
	if err := os.WriteFile(filepath.Join(bin, "Rscript"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	log := slog.New(slog.DiscardHandler)
	ws := t.TempDir()
	cfg := Config{Home: t.TempDir(), Workspace: ws, Dependencies: agentapi.Dependencies{R: map[string]string{"R6": ">=9", "jsonlite": "*"}}}

	t.Setenv("FAIL", "1")
	s := New(cfg, nil, log)
	s.Run(context.Background())
	if code, b := health(t, s); code != 503 || !strings.Contains(b.Error, "installing r dependencies (R6>=9 jsonlite) failed: exit 1: R package R6: version 2.5.1 does not satisfy >=9") {
		t.Fatalf("%d %+v", code, b)
	}
	raw, _ := os.ReadFile(argsFile)
	args := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	lib := filepath.Join(ws, ".r-library")
	if n := len(args); n < 6 || args[n-6] != lib || args[n-5] != DefaultCRANMirror || strings.Join(args[n-4:], "|") != "R6|>=9|jsonlite|" ||
		!strings.Contains(strings.Join(args, "\n"), "install.packages(need, lib = lib, repos = repo)") {
		t.Fatalf("Rscript arguments %q", args)
	}

	t.Setenv("FAIL", "")
	cfg.Mirrors.CRANMirror = "https://cran.example/"
	s = New(cfg, nil, log)
	s.Run(context.Background())
	if code, b := health(t, s); code != 200 {
		t.Fatalf("%d %+v", code, b)
	}
	if raw, _ := os.ReadFile(argsFile); !strings.Contains(string(raw), "\nhttps://cran.example/\n") {
		t.Fatalf("repository not passed: %q", raw)
	}
	os.Remove(argsFile)
	s = New(cfg, nil, log)
	s.Run(context.Background())
	if _, err := os.Stat(argsFile); err == nil {
		t.Fatal("R ran again although the workspace library holds the same packages")
	}
	if l := s.Log(); l.Status != agentapi.StartupReady || !strings.Contains(l.Steps[len(l.Steps)-1].Output, "already installed in "+lib) {
		t.Fatalf("init log %+v", l)
	}
}
