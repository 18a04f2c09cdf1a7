package sandgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestXcaddyKubernetes checks ./xcaddy.sh --kubernetes on both of its paths with recording stand-ins on PATH: with
// xcaddy it adds the Kubernetes module of this checkout as a second --with, as docs/kubernetes.md's xcaddy command
// does; without xcaddy it builds the Kubernetes module's own cmd/caddy, in kubernetes/.
func TestXcaddyKubernetes(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("xcaddy", func(t *testing.T) {
		bin := t.TempDir()
		record := filepath.Join(bin, "args")
		fake := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + record + "\n"
		if err := os.WriteFile(filepath.Join(bin, "xcaddy"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("./xcaddy.sh", "--kubernetes", "--output", "/tmp/x")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("xcaddy.sh: %v\n%s", err, b)
		}
		got, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join([]string{"build", "--output", "/tmp/x", "--with", "github.com/sandgate/sandgate=" + wd,
			"--with", "github.com/sandgate/sandgate/kubernetes=" + filepath.Join(wd, "kubernetes")}, "\n") + "\n"
		if string(got) != want {
			t.Errorf("xcaddy got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("go build", func(t *testing.T) {
		bin := t.TempDir()
		record := filepath.Join(bin, "build-args")
		fake := "#!/bin/sh\n[ \"$1\" = build ] && { pwd; printf '%s\\n' \"$@\"; } > " + record + "\nexit 0\n"
		if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "caddy")
		cmd := exec.Command("./xcaddy.sh", "--kubernetes", "--output", out)
		cmd.Env = append(os.Environ(), "SANDGATE_NO_XCADDY=1", "PATH="+bin+":"+os.Getenv("PATH"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("xcaddy.sh: %v\n%s", err, b)
		}
		raw, err := os.ReadFile(record)
		if err != nil {
			t.Fatalf("go build was not run: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if lines[0] != filepath.Join(wd, "kubernetes") {
			t.Errorf("go build ran in %s, want the Kubernetes module's directory", lines[0])
		}
		for _, w := range []string{"-trimpath", "-o", out, "./cmd/caddy"} {
			if !slices.Contains(lines[1:], w) {
				t.Errorf("go build %q lacks %s", lines[1:], w)
			}
		}
	})
}
