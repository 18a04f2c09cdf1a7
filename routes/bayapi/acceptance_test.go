package bayapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	docker "github.com/docker/docker/client"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/routes/bayapi"
)

// gateway is a real gateway process serving the API, with its own namespace of real containers.
type gateway struct {
	*testenv.Gateway
	url     string
	dataDir string
	ns      string
}

func startGateway(t *testing.T, apiOptions string, env []string, profiles bool) *gateway {
	t.Helper()
	testenv.Integration(t)
	image := testenv.Image(t, "base")
	ns := testenv.Unique("sgapi")
	removeNamespaceOnCleanup(t, ns)
	port := testenv.FreePort(t)
	dataDir := t.TempDir()
	profileBlock := ""
	if profiles {
		profileBlock = fmt.Sprintf(`
		profile python-default {
			image %s
			capabilities filesystem shell python
			memory 512m
			idle_timeout 30m
		}`, image)
	}
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	sandboxes {
		namespace %s
		on_exit destroy
		gc_interval 1s
		start_timeout 60s%s
	}
}

http://127.0.0.1:%d {
	bind 127.0.0.1
	sandbox_api {
		data_dir %s
		key sk-bob bob
		max_upload 1m
		%s
	}
}
`, ns, profileBlock, port, dataDir, apiOptions)
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: env})
	return &gateway{Gateway: g, url: fmt.Sprintf("http://127.0.0.1:%d", port), dataDir: dataDir, ns: ns}
}

// removeNamespaceOnCleanup removes whatever the test's gateway left in its namespace, even if it crashed.
func removeNamespaceOnCleanup(t *testing.T, ns string) {
	t.Cleanup(func() {
		cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		f := filters.NewArgs(filters.Arg("label", ns+".managed"))
		list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		vols, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
		for _, v := range vols.Volumes {
			_ = cli.VolumeRemove(ctx, v.Name, true)
		}
		_ = cli.NetworkRemove(ctx, ns+"-internal")
	})
}

func readCredentials(t *testing.T, dir string) bayapi.Credentials {
	t.Helper()
	path := filepath.Join(dir, bayapi.CredentialsFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("credentials.json: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials.json mode %v, want 0600", fi.Mode().Perm())
	}
	var c bayapi.Credentials
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func code(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// agentLacks reports whether err is the agent answering that it has no such route yet (an image built before
// the agent capability landed), so the rest of a subtest is skipped with a reason instead of failing on it.
func agentLacks(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && strings.Contains(e.Message, "no route")
}

// TestAstrBotAgainstGateway replays AstrBot's shipyard_neo sequence against a real gateway and real containers.
func TestAstrBotAgainstGateway(t *testing.T) {
	g := startGateway(t, "", nil, true)
	creds := readCredentials(t, g.dataDir)
	if !strings.HasPrefix(creds.APIKey, "sk-bay-") || creds.Endpoint != "http://0.0.0.0:8114" {
		t.Fatalf("credentials: %+v", creds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)

	if st, _, err := c.Health(ctx); err != nil || st != "ok" {
		t.Fatalf("health: %q %v", st, err)
	}
	profiles, err := client.New(g.url, "").Profiles(ctx)
	if err != nil || len(profiles) != 1 || profiles[0].ID != "python-default" {
		t.Fatalf("profiles: %+v %v", profiles, err)
	}
	sb, err := c.CreateSandbox(ctx, "python-default", 3600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if !strings.HasPrefix(sb.ID, "sandbox-") || sb.ExpiresAt == nil || sb.CargoID == nil {
		t.Errorf("created: %+v", sb)
	}
	// AstrBot sends no exec before the sandbox is ready: it must get there by itself. It polls every 2 s.
	ready, err := c.WaitReady(ctx, sb.ID, 2*time.Second)
	if err != nil {
		t.Fatalf("never ready: %v", err)
	}
	if len(ready.Containers) != 1 || ready.IdleExpiresAt == nil {
		t.Errorf("ready sandbox: %+v", ready)
	}

	t.Run("errors", func(t *testing.T) {
		if _, err := client.New(g.url, "sk-bay-wrong").GetSandbox(ctx, sb.ID); code(err) != "unauthorized" {
			t.Errorf("bad key: %v", err)
		}
		if _, err := client.New(g.url, "").GetSandbox(ctx, sb.ID); code(err) != "unauthorized" {
			t.Errorf("no key: %v", err)
		}
		if _, err := client.New(g.url, "sk-bob").GetSandbox(ctx, sb.ID); code(err) != "not_found" {
			t.Errorf("another owner's sandbox: %v", err)
		}
		if _, err := c.CreateSandbox(ctx, "no-such-profile", 60); code(err) != "validation_error" {
			t.Errorf("unknown profile: %v", err)
		}
		for _, p := range []string{"/etc/passwd", "/workspace/x", "../x", "a/../../x"} {
			if _, err := c.ReadFile(ctx, sb.ID, p); code(err) != "invalid_path" {
				t.Errorf("read %q: %v", p, err)
			}
		}
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		mw.WriteField("path", "big.bin")
		fw, _ := mw.CreateFormFile("file", "upload")
		fw.Write(bytes.Repeat([]byte("x"), 3<<20))
		mw.Close()
		req, _ := http.NewRequest("POST", g.url+"/v1/sandboxes/"+sb.ID+"/filesystem/upload", &body)
		req.Header.Set("Authorization", "Bearer "+creds.APIKey)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("oversized upload: %d", resp.StatusCode)
		}
	})

	t.Run("exec and files", func(t *testing.T) {
		res, err := c.Shell(ctx, sb.ID, "mkdir -p skills", 30)
		if agentLacks(err) {
			t.Skipf("the agent in this image has no exec route yet: %v", err)
		}
		if err != nil || !res.Success {
			t.Fatalf("mkdir: %+v %v", res, err)
		}
		var zbuf bytes.Buffer
		zw := zip.NewWriter(&zbuf)
		f, _ := zw.Create("demo/SKILL.md")
		f.Write([]byte("---\nname: demo\ndescription: a demo skill\n---\n"))
		zw.Close()
		if n, err := c.Upload(ctx, sb.ID, "skills/skills.zip", bytes.NewReader(zbuf.Bytes())); err != nil || n != int64(zbuf.Len()) {
			t.Fatalf("upload: %d %v", n, err)
		}
		script := "python3 - <<'PY'\nimport json, zipfile, os\nzipfile.ZipFile('skills/skills.zip').extractall('skills')\n" +
			"print(json.dumps({'skills': sorted(d for d in os.listdir('skills') if os.path.isdir(os.path.join('skills', d)))}))\nPY"
		res, err = c.Shell(ctx, sb.ID, script, 60)
		if err != nil || !res.Success {
			t.Fatalf("unzip: %+v %v", res, err)
		}
		lines := strings.Split(strings.TrimSpace(res.Output), "\n")
		var scan struct{ Skills []string }
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &scan); err != nil || len(scan.Skills) != 1 || scan.Skills[0] != "demo" {
			t.Errorf("scan output %q: %v", res.Output, err)
		}

		if err := c.WriteFile(ctx, sb.ID, "notes/a.txt", "hello"); err != nil {
			t.Fatal(err)
		}
		if s, err := c.ReadFile(ctx, sb.ID, "notes/a.txt"); err != nil || s != "hello" {
			t.Errorf("read: %q %v", s, err)
		}
		if list, err := c.ListDir(ctx, sb.ID, "notes"); err != nil || len(list) != 1 || list[0].Name != "a.txt" || list[0].IsDir {
			t.Errorf("list: %+v %v", list, err)
		}
		resp, err := c.Download(ctx, sb.ID, "notes/a.txt", "bytes=1-3")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 206 || string(b) != "ell" {
			t.Errorf("range download: %d %q", resp.StatusCode, b)
		}
		if err := c.DeleteFile(ctx, sb.ID, "notes/a.txt"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadFile(ctx, sb.ID, "notes/a.txt"); code(err) != "file_not_found" {
			t.Errorf("read after delete: %v", err)
		}

		// Idle-stopped: the next call starts it within the request.
		st, _, _ := doJSON(t, "POST", g.url+"/v1/sandboxes/"+sb.ID+"/stop", creds.APIKey)
		if st != 200 {
			t.Fatalf("stop: %d", st)
		}
		if got, _ := c.GetSandbox(ctx, sb.ID); got.Status != "idle" {
			t.Errorf("after stop: %s", got.Status)
		}
		if res, err := c.Shell(ctx, sb.ID, "cat skills/demo/SKILL.md", 60); err != nil || !strings.Contains(res.Output, "demo") {
			t.Errorf("exec after stop (workspace kept): %+v %v", res, err)
		}
		if _, total, err := c.History(ctx, sb.ID, nil); err != nil || total < 3 {
			t.Errorf("history: %d %v", total, err)
		}
	})

	t.Run("python", func(t *testing.T) {
		py, err := c.Python(ctx, sb.ID, "x = 41", 30)
		if agentLacks(err) {
			t.Skipf("the agent in this image has no python route yet: %v", err)
		}
		if err != nil || !py.Success {
			t.Fatalf("python 1: %+v %v", py, err)
		}
		py, err = c.Python(ctx, sb.ID, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1,2]); plt.show()\nprint(x + 1)", 60)
		if err != nil || !py.Success || !strings.Contains(py.Output, "42") || len(py.Data.Output.Images) == 0 {
			t.Errorf("python 2 (state kept, image): %+v %v", py, err)
		}
	})

	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSandbox(ctx, sb.ID); code(err) != "not_found" {
		t.Errorf("get after delete: %v", err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

func doJSON(t *testing.T, method, url, key string) (int, map[string]any, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

// TestExpiredSandboxAgainstGateway checks what AstrBot sees once the TTL passes: expired (then gone), and a
// capability call refused.
func TestExpiredSandboxAgainstGateway(t *testing.T) {
	g := startGateway(t, "api_key sk-config", nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := client.New(g.url, "sk-config")
	if _, err := os.Stat(filepath.Join(g.dataDir, bayapi.CredentialsFile)); !os.IsNotExist(err) {
		t.Errorf("credentials.json written although api_key is configured")
	}
	sb, err := c.CreateSandbox(ctx, "python-default", 2)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	got, err := c.GetSandbox(ctx, sb.ID)
	if err == nil && got.Status != "expired" {
		t.Errorf("after ttl: %+v", got)
	}
	if err != nil && code(err) != "not_found" {
		t.Errorf("after ttl: %v", err)
	}
	_, err = c.Shell(ctx, sb.ID, "true", 5)
	if c := code(err); c != "sandbox_expired" && c != "not_found" {
		t.Errorf("exec after ttl: %v", err)
	}
}

// TestBayEnvAgainstGateway checks that the variables AstrBot's plugin sets are honoured: BAY_SECURITY__API_KEY
// and BAY_PROFILES (Bay's images mapped onto ours), with no profile in the Caddyfile.
func TestBayEnvAgainstGateway(t *testing.T) {
	profiles := `[{"id":"python-default","image":"ghcr.io/astrbotdevs/shipyard-neo-ship:latest","resources":{"cpus":0.5,"memory":"512m"},"capabilities":["filesystem","shell","python"],"idle_timeout":600},` +
		`{"id":"tiny","image":"ship:latest","capabilities":["shell"]}]`
	g := startGateway(t, "", []string{"BAY_SECURITY__API_KEY=sk-plugin", "BAY_PROFILES=" + profiles}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(g.dataDir, bayapi.CredentialsFile)); !os.IsNotExist(err) {
		t.Errorf("credentials.json written although BAY_SECURITY__API_KEY is set")
	}
	c := client.New(g.url, "sk-plugin")
	list, err := c.Profiles(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "python-default" || list[0].IdleTimeout != 600 || list[1].ID != "tiny" ||
		list[0].Image != bayapi.SandgateBaseImage {
		t.Fatalf("profiles from BAY_PROFILES: %+v %v", list, err)
	}
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitReady(ctx, sb.ID, time.Second); err != nil {
		t.Fatalf("sandbox of a BAY_PROFILES profile: %v", err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}
