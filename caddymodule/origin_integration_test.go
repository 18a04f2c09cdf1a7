package caddymodule_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/tickets"
)

// TestConsoleAndAppsOnOneSiteRefusedAtLoad: the real binary refuses, at `caddy run`, a site that serves the console
// and proxies sandbox apps without shared_origin, and says how to fix it.
func TestConsoleAndAppsOnOneSiteRefusedAtLoad(t *testing.T) {
	testenv.Integration(t)
	bin := testenv.CaddyBinary(t)
	dir := t.TempDir()
	httpsPort := testenv.FreePort(t)
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	http_port %d
	https_port %d
	skip_install_trust
	sandboxes {
		namespace %s
	}
}

https://localhost:%d {
	tls internal
	sandbox_pages {
		console_key some-console-key
	}
	sandbox_ticket /sandboxes/*
	sandbox_proxy /sandboxes/*
}
`, testenv.FreePort(t), testenv.FreePort(t), httpsPort, testenv.Unique("sgorigin"), httpsPort)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, tickets.EnvSecret+"="+edgeSecret)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the gateway ran a config that serves the console and apps on one site:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "shared_origin") || !strings.Contains(string(out), "console") {
		t.Fatalf("want a refusal naming shared_origin, got %v:\n%s", err, out)
	}
}
