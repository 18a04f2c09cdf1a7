// Package testenv gives integration tests the real things they need: a Docker engine, our sandbox images, the
// repository root. Tests call these instead of assuming; under `go test -short` integration tests skip.
package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitLimit is how long an integration test waits for a state it expects (a server listening, a container started,
// a page painted, a process restarted) before calling it a hang. It is no timing assertion: on a machine loaded by
// stress-ng or parallel suites these waits take many times longer than on a quiet one, so it is generous, and a
// test polls for the state rather than sleeping for a guess.
const WaitLimit = 5 * time.Minute

// WaitUntil polls cond every 50 ms until it holds, and fails t with what was awaited once WaitLimit passes.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Integration skips t under -short and otherwise makes sure a Docker engine answers, installing and starting one
// (scripts/prereqs.sh) where that is possible.
func Integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs without -short")
	}
	if err := dockerReady(); err != nil {
		t.Fatalf("no Docker engine for this integration test: %v", err)
	}
}

// Runsc makes sure gVisor's runsc is the engine's runtime "runsc" (scripts/prereqs.sh runsc builds and registers
// it where it can: Debian as root; `make test` runs it first) and skips the test, saying why, where it cannot.
// Where runsc is required (RunscRequired: `make test`, CI) a missing runsc fails the test instead: the runc/runsc
// double runs must never pass there by skipping their gVisor half.
func Runsc(t testing.TB) {
	t.Helper()
	Integration(t)
	if err := runscReady(); err != nil {
		if RunscRequired() {
			t.Fatalf("gVisor's runsc is required here (SANDGATE_REQUIRE_RUNSC or CI is set) but is not registered with the engine and cannot be installed (run scripts/prereqs.sh runsc): %v", err)
		}
		t.Skipf("gVisor's runsc is not registered with the engine and cannot be installed here (run scripts/prereqs.sh runsc): %v", err)
	}
}

// RunscRequired says a test needing runsc must fail, not skip, without it: SANDGATE_REQUIRE_RUNSC is set to
// anything but "0", or CI is set to anything but "" or "false" (GitHub Actions and most CI systems set CI=true).
func RunscRequired() bool {
	if v := os.Getenv("SANDGATE_REQUIRE_RUNSC"); v != "" {
		return v != "0"
	}
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}

var (
	dockerReady = sync.OnceValue(func() error { return runScript("prereqs.sh", "docker", "base-image") })
	runscReady  = sync.OnceValue(func() error { return runScript("prereqs.sh", "runsc") })
	imageMu     sync.Mutex
	imageReady  = map[string]bool{}
)

// Image returns the tag of a sandbox image target ("base", "browser"), building it first if this process has not
// checked it yet. The build script is a no-op when the image is current. SANDGATE_IMAGE_REPO (as for
// scripts/images.sh) gives a checkout its own tags, so parallel checkouts sharing one engine never run each other's
// agent builds.
func Image(t testing.TB, target string) string {
	t.Helper()
	Integration(t)
	imageMu.Lock()
	defer imageMu.Unlock()
	tag := Getenv("SANDGATE_IMAGE_REPO", "sandgate/sandbox") + ":" + target
	if !imageReady[target] {
		if err := runScript("images.sh", target); err != nil {
			t.Fatalf("building image %s: %v", tag, err)
		}
		imageReady[target] = true
	}
	return tag
}

// ShippedImage builds and returns sandgate/sandbox:<target>, the tag Caddyfile.example names, from this checkout
// whatever SANDGATE_IMAGE_REPO says: a test of the shipped configuration runs it unmodified. Parallel checkouts
// sharing one engine overwrite this tag, so a test calls it right before it starts the gateway.
func ShippedImage(t testing.TB, target string) string {
	t.Helper()
	Integration(t)
	imageMu.Lock()
	defer imageMu.Unlock()
	const repo = "sandgate/sandbox"
	if err := runScriptEnv([]string{"SANDGATE_IMAGE_REPO=" + repo}, "images.sh", target); err != nil {
		t.Fatalf("building image %s:%s: %v", repo, target, err)
	}
	return repo + ":" + target
}

// RepoRoot is the directory holding go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func runScript(name string, args ...string) error {
	return runScriptEnv(nil, name, args...)
}

// runScriptEnv runs a script of scripts/ with env added to this process's environment.
func runScriptEnv(env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "scripts", name), args...)
	cmd.Dir = RepoRoot()
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &scriptError{name: name, err: err, out: out.String()}
	}
	return nil
}

type scriptError struct {
	name string
	err  error
	out  string
}

func (e *scriptError) Error() string {
	out := e.out
	if len(out) > 4000 {
		out = "..." + out[len(out)-4000:]
	}
	return e.name + ": " + e.err.Error() + "\n" + out
}

// Unique returns a short name unique to this test run, for labels, namespaces and container names, so parallel
// test packages sharing one engine never touch each other's sandboxes.
func Unique(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "") + "-" + randHex(3)
}

// Getenv returns the environment variable or def.
func Getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
