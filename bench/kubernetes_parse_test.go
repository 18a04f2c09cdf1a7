package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The two readers BenchmarkKubernetes reports from, tested without a cluster.

func TestLaunchStepsFromGatewayLog(t *testing.T) {
	line := func(id string, start float64) string {
		return fmt.Sprintf(`{"level":"debug","ts":1,"logger":"sandboxes","msg":"sandbox launch steps","sandbox":%q,"volume_ms":2,"start_ms":%g,"health_ms":1.5}`, id, start)
	}
	logs := line("sandbox-a", 100) + "\n" + line("sandbox-b", 300) + "\n" + line("sandbox-c", 200) + "\n" +
		line("warm-member", 9000) + "\n" + // not one of the measured ids
		`{"level":"info","msg":"sandbox launch steps are on"}` + "\n" + // the message in another record
		"not json sandbox launch steps\n"
	for _, tc := range []struct {
		name string
		ids  []string
		want string
	}{
		{"measured ids only", []string{"sandbox-a", "sandbox-b", "sandbox-c"}, "volume 2ms, start 200ms, health 1.5ms"},
		{"one id", []string{"sandbox-b"}, "volume 2ms, start 300ms, health 1.5ms"},
		{"no id logged", []string{"sandbox-z"}, "none logged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := launchSteps(logs, tc.ids); got != tc.want {
				t.Errorf("launchSteps = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClusterRSSReadsOnlyRecordedBinaries(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	pid := os.Getpid()
	for name, content := range map[string]string{
		"etcd":           fmt.Sprintf("%d %s\n", pid, self),         // this process, as recorded: counted
		"kubelet":        fmt.Sprintf("%d /usr/bin/kubelet\n", pid), // a reused pid (another binary): not counted
		"kube-scheduler": "garbage",                                 // unreadable record: not counted
	} {
		if err := os.WriteFile(filepath.Join(state, "pids", name+".pid"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := newClusterRSS(state).sample()
	if got["etcd"] <= 0 {
		t.Errorf("etcd (this process) read %d KiB, want its RSS", got["etcd"])
	}
	for _, absent := range []string{"kubelet", "kube-scheduler", "kube-apiserver"} {
		if v, ok := got[absent]; ok {
			t.Errorf("%s counted (%d KiB), want it absent", absent, v)
		}
	}
	if got[shimsKey] != 0 {
		t.Errorf("shims of a containerd socket nobody uses read %d KiB", got[shimsKey])
	}
}
