package drivertest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// The kill -9 test runs its first gateway as a real process and kills it with SIGKILL: nothing of the Manager's
// shutdown runs (no flush of its records, no Close of its store or driver), and the store's file lock goes with
// the process, as it does when a gateway dies. That process is this test binary again, running the caller's
// conformance test with childEnv set, so the child makes its driver with the same Env as the parent.
const (
	childEnv    = "SANDGATE_DRIVERTEST_GATEWAY"
	childMarker = "drivertest-gateway-ready: "
)

// childSpec tells the child gateway where to work.
type childSpec struct {
	Namespace string `json:"namespace"`
	Store     string `json:"store"`
	// Nonce goes into the sandbox's /tmp, which a restarted container would not have.
	Nonce string `json:"nonce"`
}

// childReport is what the child saw of its sandbox before it was killed.
type childReport struct {
	Sandbox     sandboxes.Sandbox `json:"sandbox"`
	ContainerID string            `json:"container_id"`
}

func adoptionConfig(image string) sandboxes.Config {
	return sandboxes.Config{Profiles: []sandboxes.Profile{baseProfile("small", image)}, GCInterval: time.Hour}
}

// runChildGateway is the child's part: a gateway that creates one sandbox, leaves a mark in its workspace and in
// its memory-backed /tmp, reports, and waits to be killed.
func runChildGateway(t *testing.T, env Env, raw string) {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil || spec.Namespace == "" || spec.Store == "" || spec.Nonce == "" {
		t.Fatalf("%s=%q: %v", childEnv, raw, err)
	}
	g := &gateway{t: t, env: env, ns: spec.Namespace, store: spec.Store, cfg: adoptionConfig(env.Image)}
	g.start()
	sb := g.create(sandboxes.CreateRequest{Profile: "small", TTL: time.Hour})
	tg := g.ready(sb.ID)
	g.output(tg, "echo kept > /workspace/file.txt && echo "+spec.Nonce+" > /tmp/alive")
	rep, err := json.Marshal(childReport{Sandbox: *g.get(sb.ID), ContainerID: g.runningContainer(sb.ID).ID})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n%s%s\n", childMarker, rep)
	// The parent kills this process. Should the parent die first, its end of stdin closes and the child ends.
	_, _ = io.Copy(io.Discard, os.Stdin)
	t.Log("the parent closed stdin before killing the child gateway")
}

// testKill9Adoption: a gateway killed with SIGKILL loses nothing. A new gateway on the same store, with a new
// driver, adopts the sandbox without restarting it (its /tmp still holds the mark), with its workspace and its TTL.
func testKill9Adoption(t *testing.T, env Env) {
	ns := env.Namespace(t)
	store := filepath.Join(t.TempDir(), "store.db")
	nonceBytes := make([]byte, 8)
	if _, err := rand.Read(nonceBytes); err != nil {
		t.Fatal(err)
	}
	spec := childSpec{Namespace: ns, Store: store, Nonce: hex.EncodeToString(nonceBytes)}
	rep := runAndKillChild(t, spec)

	g := &gateway{t: t, env: env, ns: ns, store: store, cfg: adoptionConfig(env.Image)}
	g.start()
	id := rep.Sandbox.ID
	// Adoption is the Manager's own doing: no call here starts anything, the new gateway probes the agent again.
	g.waitFor("the new gateway adopts the sandbox", func() (bool, string) {
		sb, err := g.mgr.Get(context.Background(), id)
		return err == nil && sb.Status == sandboxes.StatusReady, fmt.Sprintf("%+v %v", sb, err)
	})
	got := g.get(id)
	if got.ExpiresAt == nil || rep.Sandbox.ExpiresAt == nil || !got.ExpiresAt.Equal(*rep.Sandbox.ExpiresAt) {
		t.Errorf("TTL after adoption: expires %v, was %v", got.ExpiresAt, rep.Sandbox.ExpiresAt)
	}
	if got.WorkspaceID != rep.Sandbox.WorkspaceID || got.Owner != rep.Sandbox.Owner || got.Died != nil {
		t.Errorf("after adoption: %+v, before: %+v", got, rep.Sandbox)
	}
	if cs := g.containers(id); len(cs) != 1 || cs[0].ID != rep.ContainerID || !cs[0].Running {
		t.Fatalf("after adoption the containers are %+v, want the running %s", cs, rep.ContainerID)
	}
	tg, ok := g.mgr.Resolve(id)
	if !ok {
		t.Fatal("an adopted ready sandbox does not resolve")
	}
	if got := g.output(tg, "cat /tmp/alive"); got != spec.Nonce {
		t.Fatalf("/tmp after adoption holds %q, want %q: the container was restarted", got, spec.Nonce)
	}
	if got := g.output(tg, "cat /workspace/file.txt"); got != "kept" {
		t.Fatalf("workspace after adoption: %q", got)
	}
}

// runAndKillChild starts the child gateway, waits for its report and kills it with SIGKILL.
func runAndKillChild(t *testing.T, spec childSpec) childReport {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.Command(exe, "-test.run=^"+regexp.QuoteMeta(top)+"$", "-test.count=1", "-test.timeout="+(2*testenv.WaitLimit).String())
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the child gateway: %v", err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = stdin.Close()
	})

	reports := make(chan childReport, 1)
	var out lockedBuffer
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, childMarker); ok {
				var rep childReport
				if json.Unmarshal([]byte(rest), &rep) == nil {
					reports <- rep
				}
				continue
			}
			out.Write([]byte(line + "\n"))
		}
		close(reports)
	}()
	var rep childReport
	select {
	case r, ok := <-reports:
		if !ok {
			_ = cmd.Wait()
			waited = true
			t.Fatalf("the child gateway ended without a report (%v)\nstdout:\n%s\nstderr:\n%s", cmd.ProcessState, out.String(), stderr.String())
		}
		rep = r
	case <-time.After(testenv.WaitLimit):
		t.Fatalf("no report from the child gateway within %s\nstdout:\n%s\nstderr:\n%s", testenv.WaitLimit, out.String(), stderr.String())
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 of the child gateway: %v", err)
	}
	err = cmd.Wait()
	waited = true
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("the child gateway after kill -9: %v", err)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child gateway ended with %v, not by SIGKILL", exitErr)
	}
	return rep
}

// lockedBuffer collects a child's output from one goroutine while the test may read it on failure.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
