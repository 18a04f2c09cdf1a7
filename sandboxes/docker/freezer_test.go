package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testCID = "08b9847841c6c6299402d8af8ad4b7bed0ae579ceda287d781281245254013fb"

// TestFreezerPath: the container's freezer is found in the v1 freezer hierarchy on a v1 or hybrid host, in the
// unified one on a v2 host (cgroupfs and systemd layouts), and refused whenever the cgroup /proc names is not the
// container's own (a gateway in another PID or cgroup namespace would otherwise freeze a stranger, or itself).
func TestFreezerPath(t *testing.T) {
	hybrid := "9:name=systemd:/docker/" + testCID + "\n6:freezer:/docker/" + testCID + "\n1:cpu:/docker/" + testCID + "\n0::/docker/" + testCID + "\n"
	checkPaths(t, []pathCase[cgroupFreezer]{
		{name: "v1 cgroupfs", proc: hybrid, want: cgroupFreezer{dir: "/cg/freezer/docker/" + testCID}},
		{name: "v1 systemd", proc: "7:freezer:/system.slice/docker-" + testCID + ".scope\n",
			want: cgroupFreezer{dir: "/cg/freezer/system.slice/docker-" + testCID + ".scope"}},
		{name: "v2 cgroupfs", proc: "0::/docker/" + testCID + "\n", want: cgroupFreezer{dir: "/cg/docker/" + testCID, v2: true}},
		{name: "v2 systemd", proc: "0::/system.slice/docker-" + testCID + ".scope\n",
			want: cgroupFreezer{dir: "/cg/system.slice/docker-" + testCID + ".scope", v2: true}},
		{name: "cgroup namespace root", proc: "0::/\n", err: "does not belong"},
		{name: "another process", proc: "6:freezer:/user.slice/session-1.scope\n0::/user.slice\n", err: "does not belong"},
		{name: "id only in a parent", proc: "6:freezer:/docker/" + testCID + "/escape\n", err: "does not belong"},
		{name: "dot-dot", proc: "6:freezer:/docker/../" + testCID + "\n", err: "does not belong"},
		{name: "nothing usable", proc: "1:cpu:/docker/" + testCID + "\n", err: "no freezer"},
	}, func(cgs []procCgroup) (cgroupFreezer, error) { return freezerPath("/cg", cgs, testCID) })
}

// pathCase is one /proc/<pid>/cgroup and what a finder makes of it: want, or an unreachable error saying err.
type pathCase[T comparable] struct {
	name, proc string
	want       T
	err        string
}

func checkPaths[T comparable](t *testing.T, cases []pathCase[T], find func([]procCgroup) (T, error)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cgs, err := parseProcCgroup(strings.NewReader(tc.proc))
			if err != nil {
				t.Fatal(err)
			}
			got, err := find(cgs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errCgroupUnreachable) {
					t.Fatalf("got %+v %v, want an unreachable error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

// TestParseProcCgroupRejects: malformed lines are errors, never skipped.
func TestParseProcCgroupRejects(t *testing.T) {
	for _, in := range []string{"freezer:/docker/x", "x:freezer:/docker", "6:freezer", "6:freezer:relative/path", "-1::/"} {
		if _, err := parseProcCgroup(strings.NewReader(in)); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}

func FuzzCgroupPaths(f *testing.F) {
	for _, s := range []string{
		"6:freezer:/docker/" + testCID + "\n0::/docker/" + testCID,
		"0::/system.slice/docker-" + testCID + ".scope",
		"0::/", "6:freezer:/docker/../../" + testCID, "1:cpu,cpuacct:/x\n", "",
		"12:memory:/docker/" + testCID + "\n4:cpu,cpuacct:/docker/" + testCID,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cgs, err := parseProcCgroup(strings.NewReader(in))
		if err != nil {
			return
		}
		// Whatever /proc said, what is found is a directory of the container under the cgroup root: the freezer, and
		// the cgroups usage is read from.
		under := func(dir string) bool {
			return strings.HasPrefix(dir, "/cg/") && filepath.Clean(dir) == dir && strings.Contains(filepath.Base(dir), testCID)
		}
		if fz, err := freezerPath("/cg", cgs, testCID); err == nil && !under(fz.dir) {
			t.Fatalf("%q gave %+v", in, fz)
		}
		if cs, err := statsPaths("/cg", cgs, testCID); err == nil && (!under(cs.memDir) || !under(cs.cpuDir)) {
			t.Fatalf("%q gave usage paths %+v", in, cs)
		}
	})
}

// TestFreezerStates: freeze and thaw write the control file and read the state back, v1 and v2 (on plain files
// standing in for the kernel's: the real freezer is exercised against the engine in pause_test.go).
func TestFreezerStates(t *testing.T) {
	ctx := context.Background()
	v1 := cgroupFreezer{dir: t.TempDir()}
	if err := os.WriteFile(v1.control(), []byte("THAWED\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v1.freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := v1.state(); st != stateFrozen {
		t.Fatalf("v1 after freeze: %s", st)
	}
	if err := v1.thaw(); err != nil {
		t.Fatal(err)
	}
	if st, _ := v1.state(); st != stateThawed {
		t.Fatalf("v1 after thaw: %s", st)
	}

	v2 := cgroupFreezer{dir: t.TempDir(), v2: true}
	events := filepath.Join(v2.dir, "cgroup.events")
	// The kernel's file has no length; a plain one is overwritten in place, so it starts one byte long.
	if err := os.WriteFile(v2.control(), []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(events, []byte("populated 1\nfrozen 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v2.freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(v2.control()); string(b) != "1" {
		t.Fatalf("v2 freeze wrote %q", b)
	}
	// A thaw the kernel does not complete (a frozen parent) is an error, not a silent success.
	if err := v2.thaw(); err == nil || !strings.Contains(err.Error(), "still FROZEN") {
		t.Fatalf("thaw under a frozen parent: %v", err)
	}
	if err := os.WriteFile(events, []byte("populated 1\nfrozen 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v2.thaw(); err != nil {
		t.Fatal(err)
	}

	// A freeze that never completes is undone when its context ends: never left half frozen.
	stuck := cgroupFreezer{dir: t.TempDir(), v2: true}
	if err := os.WriteFile(stuck.control(), []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stuck.dir, "cgroup.events"), []byte("frozen 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := stuck.freeze(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("stuck freeze: %v", err)
	}
	if b, _ := os.ReadFile(stuck.control()); string(b) != "0" {
		t.Fatalf("a stuck freeze was left asking for frozen: %q", b)
	}

	// A cgroup that vanished (the container stopped) is a not-exist error, never a new file.
	gone := cgroupFreezer{dir: filepath.Join(t.TempDir(), "gone")}
	if err := gone.thaw(); !isGone(err) {
		t.Fatalf("thaw of a vanished cgroup: %v", err)
	}
}

// TestFreezableRuntime: only runc containers are frozen through their cgroup; gVisor and any other runtime go
// through the engine's pause.
func TestFreezableRuntime(t *testing.T) {
	for runtime, want := range map[string]bool{
		"": true, "runc": true, "io.containerd.runc.v2": true, "io.containerd.runtime.v1.linux": true,
		"runsc": false, "kata-runtime": false, "RUNC": false,
	} {
		if got := freezableRuntime(runtime); got != want {
			t.Errorf("freezableRuntime(%q) = %v, want %v", runtime, got, want)
		}
	}
}
