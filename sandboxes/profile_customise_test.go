package sandboxes

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestProfileCustomiseValidate(t *testing.T) {
	base := func() Profile { return Profile{ID: "p", Image: "img"} }
	for _, tc := range []struct {
		name string
		edit func(p *Profile)
		err  string
	}{
		{"ok", func(p *Profile) {
			p.Init = []string{"echo hi"}
			p.Services = []Service{{Name: "web", Command: "x", Port: 8000, Restart: "on-failure"}}
			p.Dependencies = &Dependencies{Python: map[string]string{"numpy": ">=1.26"}, Node: map[string]string{"@scope/x": "^1"}}
			p.NPMRegistry, p.PyPIIndexURL = "https://npm.example/", "https://pypi.example/simple"
			p.Egress = &Egress{Proxy: "http://proxy.example:3128", NoProxy: []string{".internal", "10.0.0.0/8"}}
		}, ""},
		{"empty init", func(p *Profile) { p.Init = []string{" "} }, "init command 0"},
		{"service twice", func(p *Profile) { p.Services = []Service{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}} }, "twice"},
		{"service restart", func(p *Profile) { p.Services = []Service{{Name: "a", Command: "x", Restart: "maybe"}} }, "restart"},
		{"bad dependency", func(p *Profile) { p.Dependencies = &Dependencies{Python: map[string]string{"-r/etc/passwd": ""}} }, "python dependency"},
		{"bad mirror", func(p *Profile) { p.AptMirror = "file:///etc" }, "apt_mirror"},
		{"r ok", func(p *Profile) {
			p.Dependencies = &Dependencies{R: map[string]string{"data.table": ">=1.14", "R6": "", "jsonlite": "*"}}
			p.CRANMirror = "https://cloud.r-project.org"
		}, ""},
		{"bad r name", func(p *Profile) { p.Dependencies = &Dependencies{R: map[string]string{"x;system('id')": ""}} }, "r dependency"},
		{"bad r version", func(p *Profile) { p.Dependencies = &Dependencies{R: map[string]string{"R6": ">= 2.5"}} }, "r dependency"},
		{"bad cran mirror", func(p *Profile) { p.CRANMirror = "ftp://cran.example" }, "cran_mirror"},
		{"bad proxy", func(p *Profile) { p.Egress = &Egress{Proxy: "socks://x"} }, "egress proxy"},
		{"bad no_proxy", func(p *Profile) { p.Egress = &Egress{NoProxy: []string{"a b"}} }, "no_proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.edit(&p)
			err := p.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
		})
	}
}

func TestCustomiseEnv(t *testing.T) {
	p := Profile{ID: "p", Image: "i", Init: []string{"a"}, Services: []Service{{Name: "web", Command: "x", Port: 3000}},
		Dependencies: &Dependencies{Python: map[string]string{"six": "1.16.0"}, Node: map[string]string{"lodash": "4"}},
		NPMRegistry:  "https://npm.example/", Egress: &Egress{Proxy: "http://proxy:3128", NoProxy: []string{"b.example", "a.example"}}}
	env := p.CustomiseEnv(map[string]string{EnvDependencies: `{"python":{"six":"1.17.0","requests":""}}`, "HTTP_PROXY": "http://mine:1"})
	var deps Dependencies
	if err := json.Unmarshal([]byte(env[EnvDependencies]), &deps); err != nil || deps.Python["six"] != "1.17.0" || deps.Python["requests"] != "" ||
		len(deps.Python) != 2 || deps.Node["lodash"] != "4" {
		t.Fatalf("merged deps %s %v", env[EnvDependencies], err)
	}
	if env[EnvInit] != `["a"]` || !strings.Contains(env[EnvServices], `"port":3000`) || !strings.Contains(env[EnvMirrors], `"npm_registry":"https://npm.example/"`) {
		t.Fatalf("env %v", env)
	}
	if _, ok := env["HTTP_PROXY"]; ok || env["HTTPS_PROXY"] != "http://proxy:3128" || env["NO_PROXY"] != "localhost,127.0.0.1,::1,a.example,b.example" {
		t.Fatalf("proxy env %v (the request's HTTP_PROXY must win)", env)
	}
	if p.AppTarget() != 3000 {
		t.Fatalf("app target %d", p.AppTarget())
	}
	// R dependencies merge the same way, and the profile's cran_mirror reaches the agent with the other mirrors.
	p.Dependencies.R, p.CRANMirror = map[string]string{"R6": ">=2.5"}, "https://cran.example/"
	env = p.CustomiseEnv(map[string]string{EnvDependencies: `{"r":{"jsonlite":""}}`})
	deps = Dependencies{}
	if err := json.Unmarshal([]byte(env[EnvDependencies]), &deps); err != nil || deps.R["R6"] != ">=2.5" || deps.R["jsonlite"] != "" || len(deps.R) != 2 {
		t.Fatalf("merged r deps %s %v", env[EnvDependencies], err)
	}
	if !strings.Contains(env[EnvMirrors], `"cran_mirror":"https://cran.example/"`) {
		t.Fatalf("mirrors %s", env[EnvMirrors])
	}
	// A malformed request value goes through untouched, so the agent fails the start with its own message.
	env = p.CustomiseEnv(map[string]string{EnvDependencies: `{"ruby":{}}`})
	if _, ok := env[EnvDependencies]; ok {
		t.Fatalf("malformed request dependencies replaced: %v", env[EnvDependencies])
	}
}

func TestAgentStartupFailure(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{503, `{"status":"failed","error":"installing python dependencies failed: No matching distribution"}`, "No matching distribution"},
		{503, `{"status":"starting"}`, ""},
		{502, `{"status":"failed"}`, ""},
		{503, `not json`, ""},
	} {
		resp := &http.Response{StatusCode: tc.status, Body: io.NopCloser(strings.NewReader(tc.body))}
		err := agentStartupFailure(resp)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || err.(*Error).Code != CodeStartupFailed) {
			t.Errorf("%d %s: %v", tc.status, tc.body, err)
		}
	}
}

func TestWithEgressDefault(t *testing.T) {
	def := &Egress{Proxy: "http://gw:3128", NoProxy: []string{".corp"}}
	in := []Profile{
		{ID: "plain"},
		{ID: "own", Egress: &Egress{Proxy: "http://mine:8080"}},
		{ID: "allow-only", Egress: &Egress{Allow: []string{"pypi.org"}, NoProxy: []string{".lan"}}},
	}
	out := WithEgressDefault(in, def)
	if out[0].Egress.Proxy != def.Proxy || out[1].Egress.Proxy != "http://mine:8080" ||
		out[2].Egress.Proxy != def.Proxy || out[2].Egress.Allow[0] != "pypi.org" || strings.Join(out[2].Egress.NoProxy, ",") != ".corp,.lan" {
		t.Fatalf("%+v %+v %+v", out[0].Egress, out[1].Egress, out[2].Egress)
	}
	if in[0].Egress != nil || in[2].Egress.Proxy != "" {
		t.Fatal("input modified")
	}
	if env := out[0].CustomiseEnv(nil); env["HTTPS_PROXY"] != def.Proxy || env["NO_PROXY"] != "localhost,127.0.0.1,::1,.corp" {
		t.Fatalf("env %v", env)
	}
}

func TestAddDependency(t *testing.T) {
	var d Dependencies
	for _, args := range [][]string{{"python", "requests", "2.32.0"}, {"node", "lodash"}, {"r", "jsonlite", "1.8"}, {"apt", "jq"}} {
		if err := AddDependency(&d, args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	if d.Python["requests"] != "2.32.0" || d.Node["lodash"] != "" || d.R["jsonlite"] != "1.8" || len(d.Apt) != 1 || d.Apt[0] != "jq" {
		t.Fatalf("dependencies: %+v", d)
	}
	for _, args := range [][]string{nil, {"python"}, {"python", "a", "1", "x"}, {"apt", "jq", "1"}, {"cargo", "serde"}} {
		if err := AddDependency(&d, args); err == nil || !strings.Contains(err.Error(), "want python|node|r") {
			t.Errorf("%q: %v", args, err)
		}
	}
}
