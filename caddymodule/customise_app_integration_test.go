package caddymodule_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// TestServiceBehindAppRoute: a profile's service (no app_port) is what /sandboxes/{id}/app/ reaches through the real
// gateway; killed with kill -9 it is restarted by the agent and reachable there again.
func TestServiceBehindAppRoute(t *testing.T) {
	e := startEdgeWith(t, `	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*`, `
		profile py {
			image `+testenv.Image(t, "base")+`
			memory 256m
			capabilities shell python filesystem
			init "mkdir -p /workspace/site && echo served-by-service > /workspace/site/index.html"
			service web {
				command "exec python3 -m http.server $PORT -d /workspace/site"
				port 8000
			}
		}`)
	id := e.createSandbox(t)
	app := func() (int, string) {
		status, body, _ := e.get(t, e.client, "/sandboxes/"+id+"/app/index.html?ticket="+e.ticket(t, id, tickets.KindApp, tickets.PermRead), nil)
		return status, strings.TrimSpace(body)
	}
	// The first request starts the sandbox; ready means init ran and the service listens.
	if status, body := app(); status != http.StatusOK || body != "served-by-service" {
		t.Fatalf("app: %d %q", status, body)
	}
	ctr := e.containerOf(t, id)
	pid, err := exec.Command("docker", "exec", ctr, "sh", "-c", "pgrep -f 'http.server 8000'").Output()
	if err != nil || strings.TrimSpace(string(pid)) == "" {
		t.Fatalf("service pid: %v %q", err, pid)
	}
	if out, err := exec.Command("docker", "exec", ctr, "kill", "-9", strings.Fields(string(pid))[0]).CombinedOutput(); err != nil {
		t.Fatalf("kill -9: %v %s", err, out)
	}
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		status, body := app()
		if status == http.StatusOK && body == "served-by-service" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after kill -9: %d %q", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	again, _ := exec.Command("docker", "exec", ctr, "sh", "-c", "pgrep -f 'http.server 8000'").Output()
	if f := strings.Fields(string(again)); len(f) == 0 || f[0] == strings.Fields(string(pid))[0] {
		t.Fatalf("the service was not restarted: before %q, after %q", pid, again)
	}
}
