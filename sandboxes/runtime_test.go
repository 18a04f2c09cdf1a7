package sandboxes

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestCheckRuntimes(t *testing.T) {
	plain, isolated, other := testProfile("plain"), testProfile("isolated"), testProfile("kata")
	isolated.Runtime = RuntimeGVisor
	other.Runtime = "kata-runtime"
	for _, tc := range []struct {
		name     string
		profiles []Profile
		have     []string
		missing  string // the profile refused, "" for none
	}{
		{"no runtime named", []Profile{plain}, []string{"runc"}, ""},
		{"no runtime named, engine lists none", []Profile{plain}, nil, ""},
		{"runsc registered", []Profile{plain, isolated}, []string{"runc", "runsc"}, ""},
		{"runsc missing", []Profile{plain, isolated}, []string{"runc", "io.containerd.runc.v2"}, "isolated"},
		{"first missing is named", []Profile{other, isolated}, []string{"runc"}, "kata"},
		{"case matters", []Profile{isolated}, []string{"RUNSC"}, "isolated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRuntimes(tc.profiles, tc.have)
			if tc.missing == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeCapabilityAbsent || e.Details["profile"] != tc.missing || e.Details["capability"] != "runtime" {
				t.Fatalf("want capability_not_supported naming profile %q, got %#v", tc.missing, err)
			}
		})
	}
}

// runtimeDriver is the fake driver with an engine that lists runtimes.
type runtimeDriver struct {
	*fakeDriver
	mu   sync.Mutex
	have []string
}

func (d *runtimeDriver) Runtimes(context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.have), nil
}

// TestStartRefusesAMissingRuntime: a profile under runsc on an engine without it stops the gateway at Start (and a
// later Apply that adds one is refused), rather than failing every create of that profile.
func TestStartRefusesAMissingRuntime(t *testing.T) {
	isolated := testProfile("isolated")
	isolated.Runtime = RuntimeGVisor
	ctx := context.Background()
	d := &runtimeDriver{fakeDriver: newFakeDriver(t), have: []string{"runc"}}
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("plain"), isolated}}); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if err := m.Start(ctx); !errors.As(err, &e) || e.Code != CodeCapabilityAbsent {
		t.Fatalf("Start: want capability_not_supported, got %v", err)
	}
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("plain")}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatalf("Start without the isolated profile: %v", err)
	}
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("plain"), isolated}}); !errors.As(err, &e) || e.Code != CodeCapabilityAbsent {
		t.Fatalf("Apply after Start: want capability_not_supported, got %v", err)
	}
	d.mu.Lock()
	d.have = append(d.have, RuntimeGVisor)
	d.mu.Unlock()
	if err := m.Apply(ctx, Config{Profiles: []Profile{testProfile("plain"), isolated}}); err != nil {
		t.Fatalf("Apply once runsc is registered: %v", err)
	}
}

// TestRefusedUnderRuntime: what profile validation refuses under gVisor, as a typed capability_not_supported Error
// naming the capability, and what it admits.
func TestRefusedUnderRuntime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mut        func(p *Profile)
		capability string // "" admitted
	}{
		{"gVisor on the internal network", func(p *Profile) { p.Runtime = RuntimeGVisor }, ""},
		{"gVisor on bridge with a warm pool", func(p *Profile) { p.Runtime, p.Network, p.WarmPoolSize = RuntimeGVisor, NetworkBridge, 2 }, ""},
		{"gVisor with network spares", func(p *Profile) { p.Runtime, p.NetworkSpares = RuntimeGVisor, 2 }, "network_spares"},
		{"gVisor on bridge with network spares", func(p *Profile) { p.Runtime, p.Network, p.NetworkSpares = RuntimeGVisor, NetworkBridge, 1 }, "network_spares"},
		{"another runtime with network spares", func(p *Profile) { p.Runtime, p.NetworkSpares = "kata-runtime", 1 }, "network_spares"},
		{"gVisor with network none", func(p *Profile) { p.Runtime, p.Network = RuntimeGVisor, NetworkNone }, "network none"},
		{"runc with network none", func(p *Profile) { p.Network = NetworkNone }, ""},
		{"runc named with network spares", func(p *Profile) { p.Runtime, p.NetworkSpares = "runc", 1 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProfile("p")
			tc.mut(&p)
			err := p.Validate()
			if tc.capability == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeCapabilityAbsent || e.Details["capability"] != tc.capability ||
				e.Details["runtime"] != p.Runtime || e.Details["profile"] != "p" {
				t.Fatalf("want capability_not_supported for %s, got %#v", tc.capability, err)
			}
			// The Manager's Apply (a gateway's start or reload) refuses it with the same code.
			m, err := NewManager(ManagerConfig{Namespace: "unit"}, newFakeDriver(t), NewBoltStore(t.TempDir()+"/store.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Apply(context.Background(), Config{Profiles: []Profile{p}}); !errors.As(err, &e) || e.Code != CodeCapabilityAbsent {
				t.Fatalf("Apply: want capability_not_supported, got %v", err)
			}
		})
	}
}
