package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// CaddyBinary builds the gateway binary (go build ./cmd/caddy, with the pages' assets) once per test process and
// returns its path: build/test-caddy in the repository, shared by every test process of the tree.
func CaddyBinary(t testing.TB) string {
	t.Helper()
	bin, err := caddyBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var caddyBinary = sync.OnceValues(func() (string, error) { return buildCaddy(RepoRoot(), "test-caddy") })

// buildCaddy builds ./cmd/caddy of the Go module in moduleDir (the gateway's, or the Kubernetes module's for the
// fleet binary) into build/<name> of the repository.
func buildCaddy(moduleDir, name string) (string, error) {
	// The pages embed npm assets at build time; a binary built without them answers its pages with 503.
	if err := runScript("prereqs.sh", "node"); err != nil {
		return "", err
	}
	if err := runScript("assets.sh"); err != nil {
		return "", err
	}
	return buildBinary(moduleDir, "./cmd/caddy", name)
}

// buildBinary builds the package pkg of the Go module in moduleDir into build/<name> of the repository.
func buildBinary(moduleDir, pkg, name string) (string, error) {
	// One path per tree, not a temporary directory per process: those were never removed (a test process has no
	// hook at its exit), and a day of test runs left gigabytes of binaries. Each process builds beside it (the Go
	// build cache makes that a link) and renames into place: a process running the old file keeps it, and one
	// about to start the binary finds either whole file, both built from this tree.
	dir := filepath.Join(RepoRoot(), "build")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "build", "-o", filepath.Join(tmp, name), pkg)
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %v\n%s", pkg, moduleDir, err, out)
	}
	bin := filepath.Join(dir, name)
	if err := os.Rename(filepath.Join(tmp, name), bin); err != nil {
		return "", fmt.Errorf("placing %s: %w", name, err)
	}
	return bin, nil
}

// Gateway is a real gateway process (our Caddy binary) run by a test.
type Gateway struct {
	t testing.TB
	// AdminAddr is host:port of Caddy's admin endpoint.
	AdminAddr string
	// DataDir is Caddy's data dir (XDG_DATA_HOME/caddy): certificates, the sandbox store.
	DataDir string
	// Env is what the process was started with, beyond the inherited environment.
	Env     []string
	cmd     *exec.Cmd
	logs    *SyncBuffer
	waitErr chan error
	xdg     string
	bin     string
}

// GatewayOptions tunes StartGateway.
type GatewayOptions struct {
	// Env adds variables (NAME=value) to the process environment.
	Env []string
	// DataHome reuses an XDG_DATA_HOME (a restart test keeps its store); empty makes a fresh one.
	DataHome string
	// Binary is the gateway binary to run; empty is CaddyBinary's. The kubernetes driver's tests pass
	// KubeCaddyBinary's (the fleet binary, built in the Kubernetes module).
	Binary string
}

// StartGateway runs the gateway with a Caddyfile. The Caddyfile should set `admin {$SANDGATE_ADMIN}` or no admin
// address at all; the helper fills SANDGATE_ADMIN and CADDY_ADMIN with a free port, so parallel tests never collide. It waits until the admin endpoint answers
// and stops the process when the test ends, printing its log if the test failed.
func StartGateway(t testing.TB, caddyfile string, opts GatewayOptions) *Gateway {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = CaddyBinary(t) // build before the clock of the start timeout runs
	}
	xdg := opts.DataHome
	if xdg == "" {
		xdg = t.TempDir()
	}
	g := &Gateway{t: t, AdminAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), xdg: xdg, DataDir: filepath.Join(xdg, "caddy"), bin: bin}
	// CADDY_ADMIN moves the admin endpoint of a Caddyfile that names none (the deploy/ files as they ship).
	g.Env = append([]string{"SANDGATE_ADMIN=" + g.AdminAddr, "CADDY_ADMIN=" + g.AdminAddr, "XDG_DATA_HOME=" + xdg,
		"XDG_CONFIG_HOME=" + xdg}, opts.Env...)
	g.start(caddyfile)
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.Logs())
		}
	})
	return g
}

func (g *Gateway) start(caddyfile string) {
	g.t.Helper()
	path := filepath.Join(g.xdg, fmt.Sprintf("Caddyfile-%d", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		g.t.Fatal(err)
	}
	if g.logs == nil {
		g.logs = &SyncBuffer{}
	}
	g.cmd = exec.Command(g.bin, "run", "--config", path, "--adapter", "caddyfile")
	g.cmd.Env = append(os.Environ(), g.Env...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		g.t.Fatalf("starting gateway: %v", err)
	}
	g.waitErr = make(chan error, 1)
	go func(cmd *exec.Cmd, ch chan error) { ch <- cmd.Wait() }(g.cmd, g.waitErr)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-g.waitErr:
			g.t.Fatalf("gateway exited at start: %v\n%s", err, g.Logs())
		default:
		}
		resp, err := http.Get("http://" + g.AdminAddr + "/config/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.t.Fatalf("gateway admin endpoint did not answer within 60s\n%s", g.Logs())
}

// Reload loads a new Caddyfile into the running process through the admin API (a real `caddy reload`).
func (g *Gateway) Reload(caddyfile string) error {
	req, err := http.NewRequest(http.MethodPost, "http://"+g.AdminAddr+"/load", strings.NewReader(caddyfile))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("posting config: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return fmt.Errorf("reload answered %s: %s", resp.Status, b.String())
	}
	return nil
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (g *Gateway) Kill() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	<-g.waitErr
	g.cmd = nil
}

// Restart starts the process again with the same data dir, environment and admin address.
func (g *Gateway) Restart(caddyfile string) {
	g.t.Helper()
	g.start(caddyfile)
}

// Stop ends the process gracefully (SIGINT), killing it after 15 s.
func (g *Gateway) Stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.waitErr:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.waitErr
	}
	g.cmd = nil
}

// Logs is everything the process printed so far.
func (g *Gateway) Logs() string { return g.logs.String() }

// RootCAPath is the internal CA's root certificate, for clients of `tls internal` sites.
func (g *Gateway) RootCAPath() string {
	return filepath.Join(g.DataDir, "pki", "authorities", "local", "root.crt")
}

// WaitRootCA waits for the internal CA to exist and returns its path.
func (g *Gateway) WaitRootCA(ctx context.Context) (string, error) {
	for {
		if _, err := os.Stat(g.RootCAPath()); err == nil {
			return g.RootCAPath(), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("internal CA root not created: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers: a process's output, a logger's sink.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Agent returns a running sandbox's agent address (host:port or unix/path) and token, from the admin endpoint's
// GET /sandboxes/{id}/agent: the sandbox's container holds only the token's digest.
func (g *Gateway) Agent(t testing.TB, id string) (addr, token string) {
	t.Helper()
	addr, token, err := g.TryAgent(id)
	if err != nil {
		t.Fatal(err)
	}
	return addr, token
}

// TryAgent is Agent for callers that poll: it reports instead of failing the test.
func (g *Gateway) TryAgent(id string) (addr, token string, err error) {
	resp, err := http.Get("http://" + g.AdminAddr + "/sandboxes/" + id + "/agent")
	if err != nil {
		return "", "", fmt.Errorf("asking the admin endpoint for the agent of %s: %w", id, err)
	}
	defer resp.Body.Close()
	var body struct {
		Addr  string `json:"addr"`
		Token string `json:"token"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Token == "" {
		return "", "", fmt.Errorf("the admin endpoint has no agent for %s (%s)", id, resp.Status)
	}
	return body.Addr, body.Token, nil
}

// CreateSandbox creates a sandbox of profile through the admin endpoint (POST /sandboxes), for owner unless it is
// empty, and returns its id.
func (g *Gateway) CreateSandbox(t testing.TB, profile, owner string) string {
	t.Helper()
	req := map[string]string{"profile": profile}
	if owner != "" {
		req["owner"] = owner
	}
	b, _ := json.Marshal(req)
	resp, err := http.Post("http://"+g.AdminAddr+"/sandboxes", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating sandbox: %s %s", resp.Status, body)
	}
	var sb struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &sb); err != nil || sb.ID == "" {
		t.Fatalf("create answered %s", body)
	}
	return sb.ID
}
