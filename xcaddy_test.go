package sandgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestXcaddyFallbackBuild builds through xcaddy.sh's fallback path (no xcaddy on PATH) with a pinned Caddy version
// and an extra plugin, and checks the binary lists every sandgate module, the plugin, and that version.
func TestXcaddyFallbackBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a whole Caddy binary")
	}
	out := filepath.Join(t.TempDir(), "caddy")
	cmd := exec.Command("./xcaddy.sh", "--version", "v2.11.9",
		"--with", "example.com/sandgate-extraplugin=./scripts/testdata/extraplugin", "--output", out)
	cmd.Env = append(os.Environ(), "SANDGATE_NO_XCADDY=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xcaddy.sh: %v\n%s", err, b)
	} else if !strings.Contains(string(b), "temporary module") {
		t.Fatalf("xcaddy.sh did not say which path it took:\n%s", b)
	}
	mods, err := exec.Command(out, "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("list-modules: %v\n%s", err, mods)
	}
	for _, want := range append(sandgateModules(t), "sandgate_test.extra") {
		if !strings.Contains(string(mods), want+"\n") {
			t.Errorf("list-modules lacks %s", want)
		}
	}
	ver, _ := exec.Command(out, "version").CombinedOutput()
	if !strings.HasPrefix(string(ver), "v2.11.9") {
		t.Errorf("version %q, want v2.11.9", ver)
	}
}

// sandgateModules are the module IDs this repository registers, read from the plain `go build ./cmd/caddy` binary's
// point of view: every caddy.ModuleInfo ID literal under caddymodule/.
func sandgateModules(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("caddymodule/*.go")
	var ids []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.Index(line, `ModuleInfo{ID: "`); i >= 0 {
				rest := line[i+len(`ModuleInfo{ID: "`):]
				ids = append(ids, rest[:strings.Index(rest, `"`)])
			}
		}
	}
	if len(ids) == 0 {
		t.Fatal("found no module IDs under caddymodule/")
	}
	return ids
}

// TestXcaddyPathArguments puts a recording stand-in for xcaddy on PATH and checks that xcaddy.sh hands it the
// invocation xcaddy documents: build, the version, the output and every --with, sandgate replaced by this checkout.
func TestXcaddyPathArguments(t *testing.T) {
	bin := t.TempDir()
	record := filepath.Join(bin, "args")
	fake := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xcaddy"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./xcaddy.sh", "--version", "v2.11.9", "--with", "github.com/caddy-dns/cloudflare", "--output", "/tmp/x")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("xcaddy.sh: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "building with xcaddy") {
		t.Errorf("xcaddy.sh did not say it used xcaddy:\n%s", b)
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	want := strings.Join([]string{"build", "v2.11.9", "--output", "/tmp/x",
		"--with", "github.com/sandgate/sandgate=" + wd, "--with", "github.com/caddy-dns/cloudflare"}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("xcaddy got\n%s\nwant\n%s", got, want)
	}
}
