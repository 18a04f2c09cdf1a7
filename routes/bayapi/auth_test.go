package bayapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

func TestLoadKeysSourceOrder(t *testing.T) {
	dir := t.TempDir()
	st := sandboxes.NewBoltStore(filepath.Join(dir, "api.db"))
	defer st.Close()
	ctx := context.Background()

	ring, err := service.LoadKeys(ctx, st, service.KeySetup{EnvKey: "env-key", ConfigKey: "cfg-key", DataDir: dir})
	if err != nil || ring.Source != service.KeyFromEnv {
		t.Fatalf("env first: %v %v", ring.Source, err)
	}
	if _, ok := ring.Lookup("cfg-key"); ok {
		t.Errorf("the config key must not be accepted when the env key wins")
	}
	if p, ok := ring.Lookup("env-key"); !ok || p.Owner != service.DefaultOwner {
		t.Errorf("env key: %+v %v", p, ok)
	}
	if ring, _ := service.LoadKeys(ctx, st, service.KeySetup{ConfigKey: "cfg-key", DataDir: dir}); ring.Source != service.KeyFromConfig {
		t.Errorf("config second: %v", ring.Source)
	}
	if _, err := os.Stat(filepath.Join(dir, service.CredentialsFile)); !os.IsNotExist(err) {
		t.Errorf("credentials.json written although a key was configured")
	}

	ring, err = service.LoadKeys(ctx, st, service.KeySetup{DataDir: dir, Endpoint: "http://0.0.0.0:8114"})
	if err != nil || ring.Source != service.KeyFromGenerated {
		t.Fatalf("generate: %v %v", ring.Source, err)
	}
	path := filepath.Join(dir, service.CredentialsFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials.json: %v %v", fi, err)
	}
	var creds service.Credentials
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &creds); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sk-bay-[0-9a-f]{64}$`).MatchString(creds.APIKey) || creds.Endpoint != "http://0.0.0.0:8114" || creds.GeneratedAt == "" {
		t.Errorf("credentials: %+v", creds)
	}
	if _, ok := ring.Lookup(creds.APIKey); !ok {
		t.Errorf("the generated key is not accepted")
	}
	keys, _ := st.ActiveKeys()
	if len(keys) != 1 || keys[0].Hash != service.HashKey(creds.APIKey) {
		t.Errorf("stored keys: %+v", keys)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "api.db"))
	if regexp.MustCompile(regexp.QuoteMeta(creds.APIKey)).Match(raw) {
		t.Errorf("the plaintext key is in the store")
	}

	// A restart finds the stored key and neither regenerates nor rewrites credentials.json.
	os.Remove(path)
	ring, err = service.LoadKeys(ctx, st, service.KeySetup{DataDir: dir})
	if err != nil || ring.Source != service.KeyFromStore {
		t.Fatalf("stored: %v %v", ring.Source, err)
	}
	if _, ok := ring.Lookup(creds.APIKey); !ok {
		t.Errorf("the stored key is not accepted after a restart")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("credentials.json rewritten on restart")
	}
}

func TestReadBayEnv(t *testing.T) {
	env, err := ReadBayEnv([]string{
		"BAY_SECURITY__API_KEY=sk-plugin",
		"BAY_SECURITY__ALLOW_ANONYMOUS=false",
		"BAY_SERVER__HOST=0.0.0.0",
		"BAY_SERVER__PORT=8114",
		"BAY_DATA_DIR=/app/data",
		"BAY_DRIVER__DOCKER__NETWORK=astrbot_net",
		`BAY_PROFILES=[{"id":"python-default","image":"ghcr.io/astrbotdevs/shipyard-neo-ship:latest","resources":{"cpus":1.0,"memory":"1g"},"capabilities":["filesystem","shell","python"],"idle_timeout":600},` +
			`{"id":"browser-python","containers":[{"name":"ship","image":"ship:latest","runtime_type":"ship","capabilities":["filesystem","shell","python"]},{"name":"browser","image":"gull:latest","runtime_type":"gull","capabilities":["browser"]}]}]`,
		"PATH=/bin",
	})
	if err != nil {
		t.Fatal(err)
	}
	if env.APIKey != "sk-plugin" || env.AllowAnonymous == nil || *env.AllowAnonymous || env.DataDir != "/app/data" || env.Endpoint() != "http://0.0.0.0:8114" {
		t.Errorf("env: %+v", env)
	}
	if len(env.Profiles) != 2 {
		t.Fatalf("profiles: %+v", env.Profiles)
	}
	p0, p1 := env.Profiles[0], env.Profiles[1]
	if p0.Image != SandgateBaseImage || p0.IdleTimeout.Std().Seconds() != 600 || p0.Network != "astrbot_net" || p0.Resources.Memory != "1g" {
		t.Errorf("python-default: %+v", p0)
	}
	if p1.Image != SandgateBrowserImage || !p1.HasCapability("browser") || !p1.HasCapability("python") || p1.IdleTimeout.Std().Seconds() != 1800 {
		t.Errorf("browser-python: %+v", p1)
	}
	if _, err := ReadBayEnv([]string{"BAY_PROFILES=not json"}); err == nil {
		t.Errorf("bad BAY_PROFILES accepted")
	}
	if env, _ := ReadBayEnv([]string{"BAY_API_KEY=a", "BAY_SECURITY__API_KEY=b"}); env.APIKey != "a" {
		t.Errorf("BAY_API_KEY must win: %q", env.APIKey)
	}
	if _, err := ReadBayEnv([]string{"BAY_SERVER__PORT=http"}); err == nil {
		t.Errorf("bad port accepted")
	}
	merged := mergeProfiles(env.Profiles[:1], env.Profiles[1:])
	if len(merged) != 2 {
		t.Errorf("merge: %+v", merged)
	}
}
