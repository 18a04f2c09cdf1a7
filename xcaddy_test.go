package sandgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestXcaddyFallbackBuild builds through xcaddy.sh's fallback path (no xcaddy on PATH) with a pinned Caddy version
// and an extra plugin, and checks the binary lists every sandgate module, the plugin, and that version.
// XCADDY_GO_BUILD_FLAGS replaces the default -trimpath, so the build reuses every dependency `go test` has compiled
// (a -trimpath build compiles them all again: most of a cold CI run's minutes); the binary's build settings show it.
func TestXcaddyFallbackBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a whole Caddy binary")
	}
	out := filepath.Join(t.TempDir(), "caddy")
	cmd := exec.Command("./xcaddy.sh", "--version", "v2.11.9",
		"--with", "example.com/sandgate-extraplugin=./scripts/testdata/extraplugin", "--output", out)
	cmd.Env = append(os.Environ(), "SANDGATE_NO_XCADDY=1", "XCADDY_GO_BUILD_FLAGS=-buildvcs=false")
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
	info, err := exec.Command("go", "version", "-m", out).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, info)
	}
	if strings.Contains(string(info), "-trimpath=true") {
		t.Errorf("built with -trimpath although XCADDY_GO_BUILD_FLAGS replaced it:\n%s", info)
	}
}

// TestXcaddyBuildFlags puts a recording stand-in for go on PATH and checks the go build flags of both fallback
// paths: -trimpath by default, XCADDY_GO_BUILD_FLAGS (split at spaces) instead of it when set, the version stamp's
// -ldflags after either.
func TestXcaddyBuildFlags(t *testing.T) {
	bin := t.TempDir()
	record := filepath.Join(bin, "build-args")
	fake := "#!/bin/sh\n[ \"$1\" = build ] && printf '%s\\n' \"$@\" > " + record + "\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, flags string
		args        []string // xcaddy.sh's arguments
		want, not   []string // among go build's arguments
		debug       bool     // DEBUG=1: the symbols kept
	}{
		{"in this module, default", "", nil, []string{"-trimpath", "-tags=nobadger,nomysql,nopgx", "./cmd/caddy"}, nil, false},
		{"in this module, replaced", "-race -tags=nobadger", nil, []string{"-race", "-tags=nobadger", "./cmd/caddy"}, []string{"-trimpath", "-tags=nobadger,nomysql,nopgx"}, false},
		{"in this module, debug", "", nil, []string{"-trimpath", "./cmd/caddy"}, nil, true},
		{"throwaway module, default", "", []string{"--version", "v2.11.9"}, []string{"-trimpath", "-tags=nobadger,nomysql,nopgx", "."}, nil, false},
		{"throwaway module, replaced", "-buildvcs=false", []string{"--version", "v2.11.9"}, []string{"-buildvcs=false", "."}, []string{"-trimpath"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(record)
			out := filepath.Join(t.TempDir(), "caddy")
			cmd := exec.Command("./xcaddy.sh", append(tc.args, "--output", out)...)
			cmd.Env = append(os.Environ(), "SANDGATE_NO_XCADDY=1", "PATH="+bin+":"+os.Getenv("PATH"), "XCADDY_GO_BUILD_FLAGS="+tc.flags, "DEBUG=")
			if tc.debug {
				cmd.Env = append(cmd.Env, "DEBUG=1")
			}
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("xcaddy.sh: %v\n%s", err, b)
			}
			raw, err := os.ReadFile(record)
			if err != nil {
				t.Fatalf("go build was not run: %v", err)
			}
			args := strings.Split(strings.TrimSpace(string(raw)), "\n")
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("go build %q lacks %s", args, w)
				}
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("go build %q has %s", args, n)
				}
			}
			i := slices.Index(args, "-ldflags")
			if i < 0 || i+1 >= len(args) || !strings.Contains(args[i+1], "caddymodule.buildVersion=") {
				t.Fatalf("go build %q lacks the version stamp", args)
			}
			if stripped := strings.HasPrefix(args[i+1], "-s -w "); stripped != !tc.debug {
				t.Errorf("go build -ldflags %q: stripped %v, want %v (DEBUG=1 keeps the symbols)", args[i+1], stripped, !tc.debug)
			}
		})
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
	fake := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + record + "\nprintf '%s' \"$XCADDY_GO_BUILD_FLAGS\" > " + record + ".flags\n"
	if err := os.WriteFile(filepath.Join(bin, "xcaddy"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./xcaddy.sh", "--version", "v2.11.9", "--with", "github.com/caddy-dns/cloudflare", "--output", "/tmp/x")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "XCADDY_GO_BUILD_FLAGS=", "DEBUG=")
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
	// xcaddy drops its own defaults (-trimpath among them) once XCADDY_GO_BUILD_FLAGS is set, which the version
	// stamp requires: the script puts the default back.
	flags, err := os.ReadFile(record + ".flags")
	if err != nil {
		t.Fatal(err)
	}
	// xcaddy splits them as a shell would (shlex): the quoted -ldflags is one argument, stripped as xcaddy's own.
	if !strings.HasPrefix(string(flags), "-trimpath -tags=nobadger,nomysql,nopgx -ldflags='-s -w -X ") || !strings.HasSuffix(string(flags), "'") ||
		!strings.Contains(string(flags), "caddymodule.buildVersion=") {
		t.Errorf("XCADDY_GO_BUILD_FLAGS %q, want -trimpath, the tags, then the stripped version stamp, quoted", flags)
	}
}
