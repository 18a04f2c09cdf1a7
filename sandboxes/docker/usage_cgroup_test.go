package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStatsPaths: memory and CPU accounting are found in v1's memory and cpu,cpuacct hierarchies (cgroupfs and
// systemd layouts) or in the unified one, and refused when the cgroup /proc names is not the container's own.
func TestStatsPaths(t *testing.T) {
	v1 := "12:memory:/docker/" + testCID + "\n4:cpu,cpuacct:/docker/" + testCID + "\n0::/docker/" + testCID + "\n"
	checkPaths(t, []pathCase[cgroupStats]{
		{name: "v1 cgroupfs", proc: v1, want: cgroupStats{memDir: "/cg/memory/docker/" + testCID, cpuDir: "/cg/cpu,cpuacct/docker/" + testCID}},
		{name: "v1 systemd", proc: "9:memory:/system.slice/docker-" + testCID + ".scope\n3:cpuacct,cpu:/system.slice/docker-" + testCID + ".scope\n",
			want: cgroupStats{memDir: "/cg/memory/system.slice/docker-" + testCID + ".scope", cpuDir: "/cg/cpuacct,cpu/system.slice/docker-" + testCID + ".scope"}},
		{name: "v2", proc: "0::/system.slice/docker-" + testCID + ".scope\n", want: cgroupStats{
			memDir: "/cg/system.slice/docker-" + testCID + ".scope", cpuDir: "/cg/system.slice/docker-" + testCID + ".scope", memV2: true, cpuV2: true}},
		{name: "another process's memory", proc: "12:memory:/user.slice\n4:cpu,cpuacct:/docker/" + testCID + "\n", err: "does not belong"},
		{name: "cgroup namespace root", proc: "0::/\n", err: "does not belong"},
		{name: "no memory controller", proc: "4:cpu,cpuacct:/docker/" + testCID + "\n", err: "no memory"},
	}, func(cgs []procCgroup) (cgroupStats, error) { return statsPaths("/cg", cgs, testCID) })
}

// TestCgroupStatsRead: the counters of v1 and v2, on plain files standing in for the kernel's (the real cgroups are
// read against the engine's own figures in usage_test.go).
func TestCgroupStatsRead(t *testing.T) {
	write := func(dir string, files map[string]string) {
		t.Helper()
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		v2    bool
		files map[string]string
		want  cgroupSample
		err   string
	}{
		{name: "v1", files: map[string]string{"memory.usage_in_bytes": "104857600\n", "memory.limit_in_bytes": "268435456\n",
			"memory.stat": "cache 4096\ninactive_file 1\ntotal_inactive_file 4194304\n", "cpuacct.usage": "1500000000\n"},
			want: cgroupSample{memory: 100<<20 - 4<<20, limit: 256 << 20, cpu: 1500 * time.Millisecond}},
		{name: "v1 without a limit", files: map[string]string{"memory.usage_in_bytes": "4096", "memory.limit_in_bytes": "9223372036854771712",
			"memory.stat": "total_inactive_file 0", "cpuacct.usage": "0"}, want: cgroupSample{memory: 4096}},
		{name: "v1 page cache over usage", files: map[string]string{"memory.usage_in_bytes": "4096", "memory.limit_in_bytes": "8192",
			"memory.stat": "total_inactive_file 8192", "cpuacct.usage": "1"}, want: cgroupSample{memory: 4096, limit: 8192, cpu: 1}},
		{name: "v2", v2: true, files: map[string]string{"memory.current": "2097152\n", "memory.max": "max\n",
			"memory.stat": "anon 1\nfile 2\ninactive_file 1048576\n", "cpu.stat": "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n"},
			want: cgroupSample{memory: 1 << 20, cpu: 2500 * time.Microsecond}},
		{name: "v2 limit", v2: true, files: map[string]string{"memory.current": "1", "memory.max": "536870912",
			"memory.stat": "inactive_file 0", "cpu.stat": "usage_usec 1"}, want: cgroupSample{memory: 1, limit: 512 << 20, cpu: time.Microsecond}},
		{name: "gone (the container stopped)", files: map[string]string{}, err: "no such file"},
		{name: "no inactive file figure", files: map[string]string{"memory.usage_in_bytes": "1", "memory.limit_in_bytes": "1",
			"memory.stat": "cache 1", "cpuacct.usage": "1"}, err: "has no total_inactive_file"},
		{name: "garbage", files: map[string]string{"memory.usage_in_bytes": "lots", "memory.limit_in_bytes": "1",
			"memory.stat": "total_inactive_file 0", "cpuacct.usage": "1"}, err: "memory.usage_in_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir, tc.files)
			got, err := cgroupStats{memDir: dir, cpuDir: dir, memV2: tc.v2, cpuV2: tc.v2}.read()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v %v, want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

// TestCgroupCPUPercent: a CPU figure needs two samples at least minCPUWindow apart; a sample sooner repeats the last
// figure, and a counter that went back (a restarted container's new cgroup) starts over.
func TestCgroupCPUPercent(t *testing.T) {
	var d Driver
	t0 := time.Now()
	fmtPct := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return strconv.FormatFloat(*p, 'f', 1, 64)
	}
	for i, step := range []struct {
		after time.Duration // since t0
		cpu   time.Duration
		want  string
	}{
		{0, time.Second, "none"},
		{minCPUWindow / 4, time.Second + 10*time.Millisecond, "none"}, // too soon, and no figure yet
		{minCPUWindow, time.Second + minCPUWindow/2, "50.0"},
		{minCPUWindow + time.Millisecond, 2 * time.Second, "50.0"},  // too soon: the last figure
		{3 * minCPUWindow, time.Second + 5*minCPUWindow/2, "100.0"}, // measured from the sample that gave 50
		{4 * minCPUWindow, time.Millisecond, "none"},                // the counter went back
		{5 * minCPUWindow, time.Millisecond + minCPUWindow/4, "25.0"},
	} {
		if got := fmtPct(d.cgroupCPUPercent("c", step.cpu, t0.Add(step.after))); got != step.want {
			t.Errorf("sample %d: %s, want %s", i, got, step.want)
		}
	}
}
