package fastgpt

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestGatewayImage builds the top-level Dockerfile (the drop-in for ghcr.io/labring/fastgpt-agent-sandbox-proxy)
// from a context holding only what .dockerignore lets in, runs it with the original's environment, and checks it
// serves plain HTTP on 1006 as a non-root user, turns healthy, and refuses to start with a short secret.
func TestGatewayImage(t *testing.T) {
	testenv.Integration(t)
	image := testenv.GatewayImage(t)

	run := func(env ...string) string {
		name := testenv.Unique("sgfg")
		args := []string{"run", "-d", "--name", name, "--label", "sandgate.test=1", "-p", "127.0.0.1::1006"}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		out, err := exec.Command("docker", append(args, image)...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker run: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			if t.Failed() {
				logs, _ := exec.Command("docker", "logs", "--tail", "50", name).CombinedOutput()
				t.Logf("%s log:\n%s", name, logs)
			}
			_ = exec.Command("docker", "rm", "-f", name).Run()
		})
		return name
	}

	t.Run("serves", func(t *testing.T) {
		name := run("AGENT_SANDBOX_PROXY_SECRET=" + testSecret)
		out, err := exec.Command("docker", "port", name, "1006/tcp").Output()
		if err != nil {
			t.Fatalf("docker port: %v", err)
		}
		base := "http://" + strings.TrimSpace(strings.Split(string(out), "\n")[0])
		if err := testenv.WaitHTTP(context.Background(), base+"/health", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(base + "/fs")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || string(body) != "Unauthorized" {
			t.Fatalf("/fs without ticket: %d %q", resp.StatusCode, body)
		}
		if uid, _ := exec.Command("docker", "exec", name, "id", "-u").Output(); strings.TrimSpace(string(uid)) == "0" {
			t.Fatal("gateway runs as root")
		}
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			st, _ := exec.Command("docker", "inspect", "-f", "{{.State.Health.Status}}", name).Output()
			if strings.TrimSpace(string(st)) == "healthy" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("container health %q after %s", strings.TrimSpace(string(st)), testenv.WaitLimit)
			}
			time.Sleep(time.Second)
		}
	})

	t.Run("short secret refuses to start", func(t *testing.T) {
		name := run("AGENT_SANDBOX_PROXY_SECRET=" + strings.Repeat("x", 31))
		out, _ := exec.Command("docker", "wait", name).Output()
		if code := strings.TrimSpace(string(out)); code == "0" || code == "" {
			t.Fatalf("exit code %q, want failure", code)
		}
		logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
		if !strings.Contains(string(logs), "at least 32 bytes") {
			t.Fatalf("log does not say why:\n%s", logs)
		}
	})
}
