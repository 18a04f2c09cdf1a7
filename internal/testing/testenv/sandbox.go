package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Sandbox is a hardened container running our agent, started directly with the docker CLI for tests of the agent
// itself (the lifecycle Manager has its own tests). Hardening mirrors DESIGN.md: non-root, no capabilities,
// no-new-privileges, init, read-only root with sized tmpfs, Memory == MemorySwap, pids limit.
type Sandbox struct {
	Name  string
	ID    string
	IP    string
	Token string
	// URL is the agent's base URL, http://IP:7777.
	URL string
}

// SandboxOptions tunes RunSandbox.
type SandboxOptions struct {
	// Target is the image target ("base" or "browser"); default "base".
	Target string
	// Image runs this image instead of Target's (a derived profile image).
	Image string
	// Env adds NAME=value pairs.
	Env []string
	// Args are extra `docker run` flags (e.g. "--tmpfs", "/workspace:size=1m").
	Args []string
	// Capabilities sets SANDGATE_CAPABILITIES.
	Capabilities []string
	// Memory caps memory and swap; default 1g.
	Memory string
	// NoWorkspaceVolume skips the named workspace volume (use Args to mount something else there).
	NoWorkspaceVolume bool
	// Runtime is the engine's OCI runtime to run it under ("runsc": gVisor; call Runsc first); default the engine's.
	Runtime string
	// NoWait returns without waiting for /health (tests of start-up failures); HealthTimeout overrides the 30 s wait.
	NoWait        bool
	HealthTimeout time.Duration
}

// RunSandbox starts a sandbox container on Docker's default bridge, waits for the agent's /health, and removes the
// container and its volume when the test ends.
func RunSandbox(t testing.TB, opts SandboxOptions) *Sandbox {
	t.Helper()
	if opts.Target == "" {
		opts.Target = "base"
	}
	if opts.Memory == "" {
		opts.Memory = "1g"
	}
	image := opts.Image
	if image == "" {
		image = Image(t, opts.Target)
	}
	s := &Sandbox{Name: Unique("sgtest"), Token: randHex(16)}
	args := []string{"run", "-d", "--name", s.Name, "--label", "sandgate.test=1",
		"--user", "65532:65532", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init",
		"--read-only", "--tmpfs", "/tmp:rw,exec,nosuid,size=256m", "--tmpfs", "/home/sandbox:rw,exec,nosuid,size=256m,uid=65532,gid=65532",
		"--memory", opts.Memory, "--memory-swap", opts.Memory, "--pids-limit", "512", "--shm-size", "256m",
		"--log-opt", "max-size=10m",
		"-e", agentapi.EnvToken + "=" + s.Token, "-e", agentapi.EnvSandboxID + "=" + s.Name,
		"-e", agentapi.EnvCapabilities + "=" + strings.Join(opts.Capabilities, ","),
	}
	if !opts.NoWorkspaceVolume {
		args = append(args, "-v", s.Name+":/workspace")
	}
	for _, e := range opts.Env {
		args = append(args, "-e", e)
	}
	if opts.Runtime != "" {
		args = append(args, "--runtime", opts.Runtime)
	}
	args = append(args, opts.Args...)
	args = append(args, image)
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	s.ID = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "100", s.Name).CombinedOutput()
			t.Logf("sandbox %s log:\n%s", s.Name, logs)
		}
		_ = exec.Command("docker", "rm", "-f", "-v", s.Name).Run()
		_ = exec.Command("docker", "volume", "rm", "-f", s.Name).Run()
	})
	s.readAddress(t)
	if opts.NoWait {
		return s
	}
	if opts.HealthTimeout == 0 {
		opts.HealthTimeout = 30 * time.Second
	}
	if err := WaitHTTP(context.Background(), s.URL+"/health", opts.HealthTimeout); err != nil {
		t.Fatalf("agent in %s did not become healthy: %v", s.Name, err)
	}
	return s
}

// Exec runs a command in the sandbox with docker exec (as the sandbox user) and returns its combined output.
func (s *Sandbox) Exec(t testing.TB, argv ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", s.Name}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %v: %v\n%s", argv, err, out)
	}
	return string(out)
}

// Request returns a request to the agent with the token set.
func (s *Sandbox) Request(ctx context.Context, method, path string, body interface{ Read([]byte) (int, error) }) (*http.Request, error) {
	var req *http.Request
	var err error
	if body == nil {
		req, err = http.NewRequestWithContext(ctx, method, s.URL+path, nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, s.URL+path, body)
	}
	if err != nil {
		return nil, err
	}
	req.Header.Set(agentapi.TokenHeader, s.Token)
	return req, nil
}

// WaitHTTP polls url until it answers 200 or the timeout passes.
func WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("status %s", resp.Status)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readAddress reads the container's address into IP and URL.
func (s *Sandbox) readAddress(t testing.TB) {
	t.Helper()
	ipOut, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", s.Name).Output()
	if err != nil {
		t.Fatalf("docker inspect: %v", err)
	}
	s.IP = strings.TrimSpace(string(ipOut))
	s.URL = fmt.Sprintf("http://%s:%d", s.IP, agentapi.DefaultPort)
}

// Restart restarts the container (what an idle stop and the next call do) and reads its address again: the engine
// may give it another one, and on the shared bridge its old one may by then belong to another test's container.
func (s *Sandbox) Restart(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "restart", s.Name).CombinedOutput(); err != nil {
		t.Fatalf("docker restart %s: %v %s", s.Name, err, out)
	}
	s.readAddress(t)
}
