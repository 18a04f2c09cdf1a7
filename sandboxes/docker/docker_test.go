package docker

import (
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/mount"

	"github.com/sandgate/sandgate/sandboxes"
)

func TestCheckRunc(t *testing.T) {
	tests := []struct {
		commit, version string
		ok              bool
		warn            string
	}{
		{"v1.1.12-0-g51d5e94", "1.1.12", true, ""},
		{"v1.2.5-0-g59923ef", "1.2.5", true, ""},
		{"1.1.5+ds1-1+deb12u1", "1.1.5", true, "CVE-2024-21626"},
		{"1.1.5+ds1-1+deb12u3", "1.1.5", true, "CVE-2024-21626"},
		{"1.1.5+ds1-1", "1.1.5", false, ""},
		{"1.1.5+ds1-1+deb12u0", "1.1.5", false, ""},
		{"1.0.0~rc93+ds1-5+deb11u3", "", true, "CVE-2024-21626"},
		{"1.0.0~rc93+ds1-5+deb11u2", "", false, ""},
		{"v1.1.11-0-gabcdef", "1.1.11", false, ""},
		{"", "1.1.4", false, ""},
		{"", "", true, "cannot tell"},
	}
	for _, tt := range tests {
		warn, err := CheckRunc(tt.commit, tt.version)
		if (err == nil) != tt.ok {
			t.Errorf("CheckRunc(%q, %q): err %v, want ok=%v", tt.commit, tt.version, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "CVE-2024-21626") {
			t.Errorf("refusal does not name the CVE: %v", err)
		}
		if tt.warn != "" && !strings.Contains(warn, tt.warn) || tt.warn == "" && warn != "" {
			t.Errorf("CheckRunc(%q, %q): warning %q, want %q", tt.commit, tt.version, warn, tt.warn)
		}
	}
}

func TestHostConfigHardening(t *testing.T) {
	spec := sandboxes.ContainerSpec{Volume: "ns-ws-1", Network: "ns-internal", AgentPort: 7777, Profile: sandboxes.Profile{
		ID: "p", Image: "img", Runtime: "runsc", Capabilities: []string{sandboxes.CapBrowser},
		Resources: sandboxes.Resources{CPUs: 1.5, Memory: "512m", Disk: "100m", Pids: 64},
	}}
	hc, err := HostConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !hc.ReadonlyRootfs || hc.Privileged || !*hc.Init || hc.AutoRemove ||
		hc.Memory != 512<<20 || hc.MemorySwap != hc.Memory || hc.NanoCPUs != 1.5e9 || *hc.PidsLimit != 64 ||
		hc.Runtime != "runsc" || hc.ShmSize != 256<<20 || string(hc.NetworkMode) != "ns-internal" || len(hc.PortBindings) != 0 {
		t.Fatalf("host config: %+v", hc)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || slices.ContainsFunc(hc.SecurityOpt, func(s string) bool { return strings.Contains(s, "unconfined") }) {
		t.Errorf("security opts %v", hc.SecurityOpt)
	}
	for _, path := range []string{"/tmp", "/home/sandbox"} {
		if o := hc.Tmpfs[path]; !strings.Contains(o, "exec") || strings.Contains(o, "noexec") || !strings.Contains(o, "size=104857600") {
			t.Errorf("tmpfs %s: %q", path, o)
		}
	}
	if len(hc.Mounts) != 1 || hc.Mounts[0].Target != "/workspace" || hc.Mounts[0].Source != "ns-ws-1" {
		t.Errorf("mounts %+v", hc.Mounts)
	}

	spec.Profile.ConnectMode, spec.Network = sandboxes.ConnectHostPort, "bridge"
	spec.HostBinds = []string{"/srv/data:/data:ro"}
	hc, _ = HostConfig(spec)
	b := hc.PortBindings["7777/tcp"]
	if len(b) != 1 || b[0].HostIP != "127.0.0.1" {
		t.Errorf("host_port must publish on 127.0.0.1 only: %+v", hc.PortBindings)
	}
	if len(hc.Mounts) != 2 || !hc.Mounts[1].ReadOnly || hc.Mounts[1].Source != "/srv/data" {
		t.Errorf("bind mounts %+v", hc.Mounts)
	}
}

func TestHostConfigMountsTheAgentSocketDir(t *testing.T) {
	spec := sandboxes.ContainerSpec{Volume: "ws", Network: "none", AgentSocketDir: "/run/sandgate/ns/sandbox-1"}
	hc, err := HostConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	if hc.NetworkMode != "none" {
		t.Fatalf("network mode %q", hc.NetworkMode)
	}
	found := false
	for _, m := range hc.Mounts {
		if m.Target == sandboxes.SocketMountPoint {
			found = m.Source == spec.AgentSocketDir && !m.ReadOnly
		}
	}
	if !found {
		t.Fatalf("socket directory not mounted: %+v", hc.Mounts)
	}
	spec.AgentSocketDir = ""
	if hc, _ := HostConfig(spec); slices.ContainsFunc(hc.Mounts, func(m mount.Mount) bool { return m.Target == sandboxes.SocketMountPoint }) {
		t.Fatal("a sandbox without a socket directory got the mount")
	}
}

// TestHostConfigWritableRoot: writable_root relaxes the read-only root and nothing else.
func TestHostConfigWritableRoot(t *testing.T) {
	p := sandboxes.Profile{ID: "w", Image: "img", WritableRoot: true}
	hc, err := HostConfig(sandboxes.ContainerSpec{Profile: p, Network: "n", Volume: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") ||
		hc.Privileged || hc.Init == nil || !*hc.Init || hc.Tmpfs["/tmp"] == "" {
		t.Fatalf("writable_root: %+v", hc)
	}
	p.WritableRoot = false
	if hc, _ := HostConfig(sandboxes.ContainerSpec{Profile: p, Network: "n", Volume: "v"}); !hc.ReadonlyRootfs {
		t.Fatal("root writable without writable_root")
	}
}

// TestDefaultsAgree: the core's DefaultResources (the ceiling of a caller's image request) are the limits the
// driver applies where a profile sets none.
func TestDefaultsAgree(t *testing.T) {
	d := sandboxes.DefaultResources
	mem, _ := sandboxes.ParseBytes(d.Memory)
	disk, _ := sandboxes.ParseBytes(d.Disk)
	if d.CPUs != DefaultCPUs || mem != DefaultMemory || disk != DefaultDisk || d.Pids != DefaultPids {
		t.Fatalf("sandboxes.DefaultResources %+v disagree with the driver's defaults", d)
	}
}

func TestAgentVolumeName(t *testing.T) {
	if got := AgentVolume("sg-agent-", "sha256:0123456789abcdef0123"); got != "sg-agent-0123456789ab" {
		t.Fatalf("AgentVolume = %q", got)
	}
}
