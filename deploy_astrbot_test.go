package sandgate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestAstrBotDeployCaddyfile runs deploy/astrbot/Caddyfile as it ships, with the environment its compose.yaml gives
// the gateway (BAY_DATA_DIR) plus a port and a label namespace of the test's own: the generated key lands in
// $BAY_DATA_DIR/credentials.json where AstrBot's discovery reads it, and AstrBot's calls work with it: Bay's
// profiles, create python-default, wait ready, an exec, a file round trip, delete. TestAstrBotComposeFile runs the
// same calls against compose.yaml.
func TestAstrBotDeployCaddyfile(t *testing.T) {
	testenv.Integration(t)
	testenv.ShippedImage(t, "base")
	deploy, err := os.ReadFile(filepath.Join("deploy", "astrbot", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique("sgastrbot")
	testenv.RemoveNamespace(t, ns)
	port := testenv.FreePort(t)
	dataDir := t.TempDir()
	g := testenv.StartGateway(t, string(deploy), testenv.GatewayOptions{Env: []string{
		"BAY_DATA_DIR=" + dataDir, fmt.Sprintf("BAY_SERVER__PORT=%d", port), "SANDGATE_NAMESPACE=" + ns}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var creds struct {
		APIKey   string `json:"api_key"`
		Endpoint string `json:"endpoint"`
	}
	for {
		b, err := os.ReadFile(filepath.Join(dataDir, "credentials.json"))
		if err == nil && json.Unmarshal(b, &creds) == nil && creds.APIKey != "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no credentials.json in BAY_DATA_DIR: %v\n%s", err, g.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.HasPrefix(creds.APIKey, "sk-bay-") || !strings.HasSuffix(creds.Endpoint, fmt.Sprintf(":%d", port)) {
		t.Errorf("credentials.json: %+v", creds)
	}
	astrBotCalls(ctx, t, fmt.Sprintf("http://127.0.0.1:%d", port), creds.APIKey)
}

// astrBotCalls makes AstrBot's calls against a gateway serving deploy/astrbot/Caddyfile: Bay's profiles, create
// python-default, wait ready, an exec, Ship's conventions (user, HOME, env file, skills), a file round trip, delete.
func astrBotCalls(ctx context.Context, t *testing.T, baseURL, key string) {
	t.Helper()
	bay := client.New(baseURL, key)
	profiles, err := bay.Profiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range profiles {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	if strings.Join(ids, ",") != "browser-python,python-default" {
		t.Errorf("profiles %v, want Bay's python-default and browser-python", ids)
	}
	sb, err := bay.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bay.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err := bay.Shell(ctx, sb.ID, "echo astrbot-$((40+2))", 60)
	if err != nil || !strings.Contains(res.Output, "astrbot-42") {
		t.Fatalf("shell/exec: %v %+v", err, res)
	}
	// Ship's conventions, as the file turns them on: Ship's user and HOME, its env file, and the built-in skill
	// written before that first exec.
	res, err = bay.Shell(ctx, sb.ID, `echo "$(id -un):$(id -u):$HOME"; test -f .bay_env.sh && echo env-file; stat -c %U skills/python-sandbox/SKILL.md`, 60)
	if err != nil || !strings.Contains(res.Output, "shipyard:1000:/workspace") || !strings.Contains(res.Output, "env-file") ||
		!strings.Contains(res.Output, "\nshipyard") {
		t.Fatalf("Ship's conventions: %v %+v", err, res)
	}
	if err := bay.WriteFile(ctx, sb.ID, "notes.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	if got, err := bay.ReadFile(ctx, sb.ID, "notes.txt"); err != nil || got != "kept" {
		t.Fatalf("file round trip: %q %v", got, err)
	}
	if err := bay.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// TestAstrBotComposeFile runs deploy/astrbot/compose.yaml as it ships (its sandgate service; AstrBot's own image
// cannot be pulled here) on the gateway image `make gateway-image` builds, with only the variables the file offers
// for a second instance: the image tag, the port and the label namespace. The gateway runs in a container, manages
// sandboxes through the socket, programs the host's packet filter, and answers AstrBot's calls with the key it
// wrote into its data volume.
func TestAstrBotComposeFile(t *testing.T) {
	testenv.Integration(t)
	testenv.ShippedImage(t, "base")
	image := testenv.GatewayImage(t)
	ns := testenv.Unique("sgcompose")
	testenv.RemoveNamespace(t, ns)
	port := testenv.FreePort(t)
	p := testenv.StartCompose(t, filepath.Join("deploy", "astrbot", "compose.yaml"), ns, []string{"SANDGATE_GATEWAY_IMAGE=" + image,
		fmt.Sprintf("BAY_SERVER__PORT=%d", port), "SANDGATE_NAMESPACE=" + ns}, "sandgate")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key := p.WaitAPIKey(ctx, "sandgate", "/data/credentials.json")
	astrBotCalls(ctx, t, fmt.Sprintf("http://127.0.0.1:%d", port), key)
}
