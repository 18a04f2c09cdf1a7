package bayapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestCreateWithDependenciesAgainstGateway: dependencies given at create through the real API reach the agent
// through the Manager; the sandbox turns ready only after the Python and the Node package import (from the test's
// registries, reached through the profile's mirror settings); a package the index does not have ends the sandbox
// failed, and a call on it carries pip's own message.
func TestCreateWithDependenciesAgainstGateway(t *testing.T) {
	testenv.Integration(t)
	reg := testenv.StartRegistries(t)
	nodeImage := testenv.Image(t, "node")
	g := startGateway(t, "key sk-alice alice", nil, false, func(cf string) string {
		return strings.Replace(cf, "start_timeout 60s", `start_timeout 120s
		profile node-default {
			image `+nodeImage+`
			capabilities filesystem shell python node
			memory 512m
			network bridge
			npm_registry `+reg.URL+`/
			pypi_index_url `+reg.URL+`/simple/
		}`, 1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	alice := client.New(g.url, "sk-alice")

	var sb client.Sandbox
	began := time.Now()
	err := alice.Do(ctx, http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "node-default", "ttl": 600,
		"dependencies": map[string]any{
			"python": map[string]string{testenv.RegistryPyPackage: "1.0.0"},
			"node":   map[string]string{testenv.RegistryNodePackage: "^1.0.0"},
		}}, &sb)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := alice.WaitReady(ctx, sb.ID, 100*time.Millisecond); err != nil {
		t.Fatalf("never ready: %v", err)
	}
	t.Logf("ready with both dependencies after %s; registry requests %v", time.Since(began), reg.Requests())
	py, err := alice.Python(ctx, sb.ID, "import sgdemo\nprint(sgdemo.VALUE)", 30)
	if err != nil || !py.Success || strings.TrimSpace(py.Output) != "42" {
		t.Fatalf("python import: %+v %v", py, err)
	}
	sh, err := alice.Shell(ctx, sb.ID, `node -e "console.log(require('sg-demo').value)"`, 30)
	if err != nil || sh.ExitCode != 0 || strings.TrimSpace(sh.Output) != "7" {
		t.Fatalf("node require: %+v %v", sh, err)
	}

	var bad client.Sandbox
	err = alice.Do(ctx, http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "node-default", "ttl": 600,
		"dependencies": map[string]any{"python": map[string]string{"sgdoesnotexist": "9.9"}}}, &bad)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := alice.GetSandbox(ctx, bad.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s, want failed", got.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var failed struct {
		Status    string `json:"status"`
		LastError string `json:"last_error"`
	}
	if err := alice.Do(ctx, http.MethodGet, "/v1/sandboxes/"+bad.ID, nil, &failed); err != nil ||
		!strings.Contains(failed.LastError, "No matching distribution found for sgdoesnotexist==9.9") {
		t.Errorf("the failed sandbox's last_error: %+v %v", failed, err)
	}
	// A call on a failed sandbox starts it again (right away: the Manager removed the failed container before it
	// reported the failure), which fails again: ship_error with pip's message in details.last_error.
	_, err = alice.Shell(ctx, bad.ID, "true", 10)
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadGateway || apiErr.Code != "ship_error" ||
		!strings.Contains(err.Error(), "No matching distribution found for sgdoesnotexist==9.9") {
		t.Fatalf("a call on the failed sandbox should be ship_error with pip's message: %v", err)
	}
	if msg, _ := apiErr.Details["last_error"].(string); !strings.Contains(msg, "No matching distribution found for sgdoesnotexist==9.9") {
		t.Errorf("details.last_error: %v", apiErr.Details)
	}
	t.Logf("failed sandbox answers: %v", err)
}
