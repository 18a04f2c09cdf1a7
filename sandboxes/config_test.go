package sandboxes

import (
	"context"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	base := func(mut func(p *Profile)) Config {
		p := testProfile("p")
		mut(&p)
		return Config{Profiles: []Profile{p}}
	}
	tests := []struct {
		name  string
		cfg   Config
		binds bool
		want  string
	}{
		{"defaults", base(func(*Profile) {}), false, ""},
		{"network none", base(func(p *Profile) { p.Network = NetworkNone }), false, ""},
		{"host_port on none", base(func(p *Profile) { p.ConnectMode, p.Network = ConnectHostPort, NetworkNone }), false, "none network cannot carry"},
		{"host_port on internal", base(func(p *Profile) { p.ConnectMode = ConnectHostPort }), false, "internal or none network cannot carry"},
		{"host_port on bridge", base(func(p *Profile) { p.ConnectMode, p.Network = ConnectHostPort, NetworkBridge }), false, ""},
		{"network spares on internal", base(func(p *Profile) { p.NetworkSpares = 2 }), false, ""},
		{"network spares on bridge", base(func(p *Profile) { p.NetworkSpares, p.Network = MaxNetworkSpares, NetworkBridge }), false, ""},
		{"network spares on none", base(func(p *Profile) { p.NetworkSpares, p.Network = 1, NetworkNone }), false, "network_spares needs"},
		{"network spares on a named network", base(func(p *Profile) { p.NetworkSpares, p.Network = 1, "corp" }), false, "network_spares needs"},
		{"network spares under gVisor", base(func(p *Profile) { p.NetworkSpares, p.Runtime = 1, RuntimeGVisor }), false, "network_spares does not work under runtime runsc"},
		{"network spares under runc named", base(func(p *Profile) { p.NetworkSpares, p.Runtime = 1, "runc" }), false, ""},
		{"network spares with host_port", base(func(p *Profile) { p.NetworkSpares, p.Network, p.ConnectMode = 1, NetworkBridge, ConnectHostPort }), false, "network_spares needs"},
		{"too many network spares", base(func(p *Profile) { p.NetworkSpares = MaxNetworkSpares + 1 }), false, "between 0 and"},
		{"negative network spares", base(func(p *Profile) { p.NetworkSpares = -1 }), false, "between 0 and"},
		{"binds refused", base(func(p *Profile) { p.Binds = []string{"/srv:/srv"} }), false, "allow_host_binds"},
		{"binds allowed", base(func(p *Profile) { p.Binds = []string{"/srv:/srv:ro"} }), true, ""},
		{"docker socket", base(func(p *Profile) { p.Binds = []string{"/var/run/docker.sock:/var/run/docker.sock"} }), true, "container engine"},
		{"bind over workspace", base(func(p *Profile) { p.Binds = []string{"/srv:/workspace"} }), true, "hides the workspace"},
		{"relative bind", base(func(p *Profile) { p.Binds = []string{"srv:/srv"} }), true, "must be"},
		{"duplicate", Config{Profiles: []Profile{testProfile("a"), testProfile("a")}}, false, "defined twice"},
		{"negative cap", Config{MaxSandboxes: -1}, false, "negative"},
		{"negative gc interval", Config{GCInterval: -1}, false, "must not be negative"},
		{"negative refill rate", Config{WarmRefillPerSecond: -1}, false, "must not be negative"},
		{"negative retry backoff", Config{WarmRetryBackoff: -1}, false, "must not be negative"},
		{"bad memory", base(func(p *Profile) { p.Resources.Memory = "lots" }), false, "memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AllowHostBinds = tt.binds
			err := tt.cfg.Validate()
			if tt.want == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestApplyRefusesInvalidConfigAndKeepsTheOld(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	bad := testProfile("b")
	bad.Network, bad.ConnectMode = NetworkNone, ConnectHostPort
	if err := m.Apply(context.Background(), Config{Profiles: []Profile{bad}}); ErrorCode(err) != CodeInvalid {
		t.Fatalf("apply: %v", err)
	}
	if _, ok := m.Profile("a"); !ok {
		t.Fatal("a refused config replaced the profiles")
	}
}
