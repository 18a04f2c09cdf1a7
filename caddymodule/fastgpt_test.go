package caddymodule_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/caddymodule"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestFastGPTDeployCaddyfileGolden keeps deploy/fastgpt/Caddyfile (the gateway image's config) in the golden set.
// Adapting it reads PORT, PREVIEW_PORT and SANDGATE_ADMIN, so the golden JSON is for an empty environment.
func TestFastGPTDeployCaddyfileGolden(t *testing.T) {
	for _, v := range []string{"PORT", "PREVIEW_PORT", "SANDGATE_ADMIN"} {
		if _, set := os.LookupEnv(v); set {
			t.Skipf("%s is set: the golden file is for an empty environment", v)
		}
	}
	deploy, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "fastgpt", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	input, _ := readGolden(t, "testdata/fastgpt_deploy.caddyfiletest")
	if strings.TrimSpace(input) != strings.TrimSpace(string(deploy)) {
		t.Fatal("testdata/fastgpt_deploy.caddyfiletest does not hold deploy/fastgpt/Caddyfile; copy it over and rerun with SANDGATE_UPDATE_GOLDEN=1")
	}
}

// TestFastGPTProviderCaddyfileGolden keeps deploy/fastgpt/provider.Caddyfile (the one-binary deployment of
// docs/fastgpt.md) in the golden set, adapted for an empty environment, and validates it as Caddy would load it
// (every module provisions: profiles, allowed_images, both sites).
func TestFastGPTProviderCaddyfileGolden(t *testing.T) {
	for _, v := range []string{"PORT", "SANDGATE_ADMIN", "SANDGATE_BIND", "SANDGATE_ENDPOINT_HOST", "FASTGPT_SANDBOX_IMAGES",
		"SANDGATE_SANDBOX_CPUS", "SANDGATE_SANDBOX_MEMORY", "SANDGATE_API_PORT", "SANDGATE_OPENSANDBOX_PORT"} {
		if _, set := os.LookupEnv(v); set {
			t.Skipf("%s is set: the golden file is for an empty environment", v)
		}
	}
	deploy, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "fastgpt", "provider.Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	input, _ := readGolden(t, "testdata/fastgpt_provider.caddyfiletest")
	if strings.TrimSpace(input) != strings.TrimSpace(string(deploy)) {
		t.Fatal("testdata/fastgpt_provider.caddyfiletest does not hold deploy/fastgpt/provider.Caddyfile; copy it over and rerun with SANDGATE_UPDATE_GOLDEN=1")
	}
	bin := testenv.CaddyBinary(t)
	cmd := exec.Command(bin, "validate", "--config", filepath.Join(testenv.RepoRoot(), "deploy", "fastgpt", "provider.Caddyfile"), "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "AGENT_SANDBOX_PROXY_SECRET="+strings.Repeat("s", 32), "XDG_DATA_HOME="+t.TempDir(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("caddy validate deploy/fastgpt/provider.Caddyfile: %v\n%s", err, out)
	}
}

// TestFastGPTProxyProvision: the options default to the original's environment variables, and a missing or short
// secret fails the config as the original refuses to start.
func TestFastGPTProxyProvision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string
		handler caddymodule.FastGPTProxy
		wantErr string
	}{
		{name: "secret from env", env: strings.Repeat("s", 32)},
		{name: "secret option", handler: caddymodule.FastGPTProxy{Secret: strings.Repeat("o", 40)}},
		{name: "no secret", wantErr: "no secret"},
		{name: "short env secret", env: strings.Repeat("s", 31), wantErr: "at least 32 bytes"},
		{name: "short option", env: strings.Repeat("s", 32), handler: caddymodule.FastGPTProxy{Secret: "short"}, wantErr: "at least 32 bytes"},
		{name: "bad serve", env: strings.Repeat("s", 32), handler: caddymodule.FastGPTProxy{Serve: "both"}, wantErr: "routes must be"},
		{name: "bad app url", env: strings.Repeat("s", 32), handler: caddymodule.FastGPTProxy{AppURL: "fastgpt:3000"}, wantErr: "must start with http"},
		{name: "unparsable env timeout falls back", env: strings.Repeat("s", 32), handler: caddymodule.FastGPTProxy{RequestTimeout: "{env.SANDGATE_TEST_NOT_SET}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENT_SANDBOX_PROXY_SECRET", tc.env)
			ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
			defer cancel()
			h := tc.handler
			err := h.Provision(ctx)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Provision: %v, want error containing %q", err, tc.wantErr)
			}
			if err == nil {
				_ = h.Cleanup()
			}
		})
	}
}
