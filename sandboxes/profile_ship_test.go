package sandboxes

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestProfileShipValidate(t *testing.T) {
	ship := func(f func(p *Profile)) Profile {
		p := Profile{ID: "ship", Image: "sandgate/sandbox:base", Env: map[string]string{"API_KEY": "x"}}
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name    string
		p       Profile
		wantErr string
	}{
		{"none", ship(func(p *Profile) {}), ""},
		{"ship", ship(func(p *Profile) {
			p.User = &SandboxUser{Name: "shipyard", UID: 1000}
			p.Home, p.EnvFile, p.HostAliases = "/workspace", "/workspace/.bay_env.sh", []string{"ship"}
		}), ""},
		{"home default", ship(func(p *Profile) { p.Home = SandboxHome }), ""},
		{"root by uid", ship(func(p *Profile) { p.User = &SandboxUser{Name: "admin", UID: 0} }), "never run as root"},
		{"root by name", ship(func(p *Profile) { p.User = &SandboxUser{Name: "root", UID: 1000} }), "never run as root"},
		{"uid too big", ship(func(p *Profile) { p.User = &SandboxUser{Name: "u", UID: 65534} }), "between 1 and 65533"},
		{"negative uid", ship(func(p *Profile) { p.User = &SandboxUser{Name: "u", UID: -1} }), "between 1 and 65533"},
		{"name with colon", ship(func(p *Profile) { p.User = &SandboxUser{Name: "a:0:0", UID: 1000} }), "user name"},
		{"name with newline", ship(func(p *Profile) { p.User = &SandboxUser{Name: "a\nroot", UID: 1000} }), "user name"},
		{"empty name", ship(func(p *Profile) { p.User = &SandboxUser{UID: 1000} }), "user name"},
		{"user with injected agent", ship(func(p *Profile) {
			p.User = &SandboxUser{Name: "shipyard", UID: 1000}
			p.InjectAgent = true
		}), "injected agent"},
		{"user with network none", ship(func(p *Profile) {
			p.User = &SandboxUser{Name: "shipyard", UID: 1000}
			p.Network = NetworkNone
		}), "network none"},
		{"home elsewhere", ship(func(p *Profile) { p.Home = "/root" }), "home"},
		{"home relative", ship(func(p *Profile) { p.Home = "workspace" }), "home"},
		{"home with colon", ship(func(p *Profile) { p.Home = "/workspace:/bin/sh" }), "home"},
		{"env file outside", ship(func(p *Profile) { p.EnvFile = "/etc/profile.d/x.sh" }), "env_file"},
		{"env file nested", ship(func(p *Profile) { p.EnvFile = "/workspace/a/b.sh" }), "env_file"},
		{"env file dotdot", ship(func(p *Profile) { p.EnvFile = "/workspace/../x.sh" }), "env_file"},
		{"env file workspace", ship(func(p *Profile) { p.EnvFile = "/workspace/" }), "env_file"},
		{"env file with a non-shell name", ship(func(p *Profile) {
			p.EnvFile = "/workspace/.bay_env.sh"
			p.Env["A-B"] = "1"
		}), "shell variable"},
		{"alias uppercase", ship(func(p *Profile) { p.HostAliases = []string{"Ship"} }), "host alias"},
		{"alias dotted", ship(func(p *Profile) { p.HostAliases = []string{"ship.local"} }), "host alias"},
		{"alias localhost", ship(func(p *Profile) { p.HostAliases = []string{"localhost"} }), "host alias"},
		{"alias twice", ship(func(p *Profile) { p.HostAliases = []string{"ship", "ship"} }), "twice"},
		{"alias with spares", ship(func(p *Profile) {
			p.HostAliases = []string{"ship"}
			p.NetworkSpares = 1
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want an error with %q", err, tc.wantErr)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalid {
				t.Fatalf("Validate = %#v, want a typed %s error", err, CodeInvalid)
			}
		})
	}
}

func TestProfileShipEnv(t *testing.T) {
	p := Profile{ID: "ship", Image: "img", Env: map[string]string{"B": "2", "A": "1", "SANDGATE_X": "y"},
		User: &SandboxUser{Name: "shipyard", UID: 1000}, Home: "/workspace", EnvFile: "/workspace/.bay_env.sh"}
	env := map[string]string{"HOME": "/caller"}
	p.shipEnv(env)
	want := map[string]string{"HOME": "/workspace", "USER": "shipyard", "LOGNAME": "shipyard",
		agentapi.EnvEnvFile: "/workspace/.bay_env.sh", agentapi.EnvEnvFileNames: "A,B"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if got := p.Passwd(); got != "shipyard:x:1000:1000::/workspace:/bin/bash" {
		t.Errorf("Passwd = %q", got)
	}
	plain := Profile{ID: "plain", Image: "img"}
	env = map[string]string{agentapi.EnvEnvFile: "/workspace/x.sh", agentapi.EnvEnvFileNames: "PATH"} // a caller's
	plain.shipEnv(env)
	if len(env) != 0 || plain.UID() != DefaultSandboxUID || plain.Passwd() != "" {
		t.Errorf("a profile without Ship options changed: env %v, uid %d, passwd %q", env, plain.UID(), plain.Passwd())
	}
	// The Hash (warm pool members) changes with each option.
	for _, f := range []func(*Profile){
		func(q *Profile) { q.User = nil }, func(q *Profile) { q.Home = "" }, func(q *Profile) { q.EnvFile = "" },
		func(q *Profile) { q.HostAliases = []string{"ship"} },
	} {
		q := p
		f(&q)
		if q.Hash() == p.Hash() {
			t.Errorf("a changed Ship option keeps the profile's hash")
		}
	}
}

func TestParseSandboxUser(t *testing.T) {
	if u, err := ParseSandboxUser("shipyard", "1000"); err != nil || *u != (SandboxUser{Name: "shipyard", UID: 1000}) {
		t.Fatalf("%+v %v", u, err)
	}
	if _, err := ParseSandboxUser("shipyard", "x"); err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Fatalf("a uid of x: %v", err)
	}
}
