package sandgate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestFastGPTComposeFile runs deploy/fastgpt/compose.yaml as it ships: its sandgate service (FastGPT's own service
// cannot run here: its image cannot be pulled, nor its databases) on the gateway image `make gateway-image` builds,
// with provider.Caddyfile as the file mounts it. Only the file's own variables are set, and only where this machine
// differs from a FastGPT host: FastGPT's app (a fake verifyTicket on loopback), FastGPT's sandbox image (the
// FastGPT-shaped image built here, whose stand-in IDE agent answers as FastGPT's does), and the addresses (a
// test sends traffic to loopback only, so both sites bind 127.0.0.1, on free ports, with a label namespace of its
// own). Then the gateway answers as FastGPT's provider and proxy: the key it wrote into its data volume works and
// a wrong one is INVALID_API_KEY; the real npm SDK creates from FastGPT's create body, runs a command and gets the
// 1318 endpoint; and FastGPT's IDE protocol reaches the image's own IDE agent through the proxy site on that
// endpoint, with tickets signed with the file's AGENT_SANDBOX_PROXY_SECRET.
func TestFastGPTComposeFile(t *testing.T) {
	testenv.Integration(t)
	mods := testenv.NodeModules(t)
	theirs := testenv.FastGPTImage(t)
	image := testenv.GatewayImage(t)
	testenv.ShippedImage(t, "base") // provider.Caddyfile's profile image, and where the injected agent comes from
	const secret = "fastgpt-compose-secret-0123456789abcdef"
	app := testenv.NewFastGPTApp(t, secret)
	ns := testenv.Unique("sgfgcompose")
	testenv.RemoveNamespace(t, ns)
	osbPort, proxyPort, apiPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	p := testenv.StartCompose(t, filepath.Join("deploy", "fastgpt", "compose.yaml"), ns, []string{
		"SANDGATE_GATEWAY_IMAGE=" + image,
		"AGENT_SANDBOX_PROXY_SECRET=" + secret,
		"FASTGPT_APP_URL=" + app.URL,
		"SANDGATE_BIND=127.0.0.1",
		fmt.Sprintf("SANDGATE_OPENSANDBOX_PORT=%d", osbPort),
		fmt.Sprintf("SANDGATE_ENDPOINT_HOST=127.0.0.1:%d", osbPort),
		"SANDGATE_PROXY_BIND=127.0.0.1",
		fmt.Sprintf("SANDGATE_PROXY_PORT=%d", proxyPort),
		fmt.Sprintf("SANDGATE_API_PORT=%d", apiPort),
		"SANDGATE_NAMESPACE=" + ns,
		"FASTGPT_SANDBOX_IMAGES=" + theirs,
		"SANDGATE_SANDBOX_CPUS=1",
		"SANDGATE_SANDBOX_MEMORY=1g",
	}, "sandgate")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key := p.WaitAPIKey(ctx, "sandgate", "/data/caddy/sandgate/credentials.json")
	osb := fmt.Sprintf("http://127.0.0.1:%d", osbPort)
	proxy := fmt.Sprintf("127.0.0.1:%d", proxyPort)
	for _, u := range []string{osb + "/health", "http://" + proxy + "/health"} {
		if err := testenv.WaitHTTP(ctx, u, testenv.WaitLimit); err != nil {
			t.Fatal(err)
		}
	}

	// A wrong key is OpenSandbox's INVALID_API_KEY.
	req, _ := http.NewRequestWithContext(ctx, "GET", osb+"/v1/sandboxes", nil)
	req.Header.Set("OPEN-SANDBOX-API-KEY", "not-"+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"INVALID_API_KEY"`) {
		t.Fatalf("a wrong key: %d %s", resp.StatusCode, body)
	}

	// FastGPT's create body through the real SDK, with the key from the data volume, on FastGPT's (shaped) image.
	out, err := testenv.RunNode(t, filepath.Join("caddymodule", "testdata", "opensandbox_fastgpt.cjs"),
		"OSB_DOMAIN="+osb, "OSB_KEY="+key, "OSB_IMAGES="+theirs, "NODE_PATH="+mods)
	line := strings.TrimSpace(out)
	line = line[strings.LastIndex(line, "\n")+1:]
	var rep struct {
		Images []struct {
			ID  string `json:"id"`
			Run struct {
				ExitCode int    `json:"exitCode"`
				Stdout   string `json:"stdout"`
			} `json:"run"`
			Endpoint1318 string `json:"endpoint1318"`
		} `json:"images"`
		Fatal string `json:"fatal"`
	}
	if jerr := json.Unmarshal([]byte(line), &rep); jerr != nil || err != nil || rep.Fatal != "" || len(rep.Images) != 1 {
		t.Fatalf("sdk script: %v %v\n%s", err, jerr, out)
	}
	im := rep.Images[0]
	lines := strings.Split(im.Run.Stdout, "\n")
	if im.Run.ExitCode != 0 || len(lines) < 5 || lines[0] != "65532" || lines[1] != "/home/sandbox" || lines[2] != "sess-0" ||
		len(lines[3]) < 20 || lines[4] != "uid=65532 home=/home/sandbox" {
		t.Fatalf("commands.run on FastGPT's image: %+v", im.Run)
	}
	if !strings.HasPrefix(im.Endpoint1318, fmt.Sprintf("%s/sandboxes/%s.", osb, im.ID)) {
		t.Fatalf("endpoint of 1318: %q", im.Endpoint1318)
	}
	if c := testenv.Inspect(t, testenv.ContainerOf(t, ns, im.ID)); c.Config.Image != theirs {
		t.Errorf("the sandbox runs %q, want %q", c.Config.Image, theirs)
	}

	// FastGPT's IDE protocol through the proxy site, relayed to that endpoint: the profile leaves the IDE ports to
	// the image (SANDGATE_IDE_AGENT image), so the image's own IDE agent answers.
	app.Point(im.Endpoint1318, lines[3])
	got := testenv.FastGPTIDE(t, proxy, secret, "ide/compose.txt", "cat /workspace/ide/compose.txt; echo; tr '\\0' ' ' < /proc/$PPID/cmdline")
	if want := "hello ide\n/usr/local/bin/fastgpt-ide-agent "; got != want {
		t.Errorf("fs/exec through the proxy site: %q, want %q", got, want)
	}
}
