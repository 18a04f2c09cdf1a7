package docker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestProfileCustomisationThroughManager: a profile's init commands and services reach the agent through the
// Manager's environment; the sandbox is ready only after init ran; a failing init command ends the sandbox failed
// with the command's own message (not a health-probe timeout).
func TestProfileCustomisationThroughManager(t *testing.T) {
	good := smallProfile("custom", "")
	good.Init = []string{"echo from-init > /workspace/init.txt"}
	good.Services = []sandboxes.Service{{Name: "web", Command: "exec python3 -m http.server $PORT", Port: 8000}}
	bad := smallProfile("custom-bad", "")
	bad.Init = []string{"echo 'schema missing' >&2; exit 3"}
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{good, bad}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sb, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "custom"})
	if err != nil {
		t.Fatal(err)
	}
	target, err := h.mgr.EnsureRunning(ctx, sb.ID)
	if err != nil {
		t.Fatalf("ensure running: %v", err)
	}
	if target.AppPort != 8000 {
		t.Fatalf("target app port %d, want the service's 8000", target.AppPort)
	}
	// What /app does: the agent's port proxy to the service, which was listening when the sandbox turned ready.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/proxy/%d/init.txt", target.Addr, target.AppPort), nil)
	req.Header.Set("X-Sandgate-Token", target.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "from-init\n" {
		t.Fatalf("service through the app port: %s %q", resp.Status, body)
	}

	failed, err := h.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "custom-bad"})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = h.mgr.EnsureRunning(ctx, failed.ID)
	if err == nil || !strings.Contains(err.Error(), "schema missing") {
		t.Fatalf("want the init command's message, got %v", err)
	}
	got, err := h.mgr.Get(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != sandboxes.StatusFailed || !strings.Contains(got.LastError, "init command 1") || !strings.Contains(got.LastError, "schema missing") {
		t.Fatalf("status %s, last error %q", got.Status, got.LastError)
	}
	t.Logf("failed after %s: %s", time.Since(began), got.LastError)
}
