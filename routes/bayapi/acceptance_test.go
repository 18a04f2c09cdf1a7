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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/routes/bayapi"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// gateway is a real gateway process serving the API, with its own namespace of real containers.
type gateway struct {
	*testenv.Gateway
	url       string
	dataDir   string
	ns        string
	caddyfile string
}

func startGateway(t *testing.T, apiOptions string, env []string, profiles bool, edit ...func(string) string) *gateway {
	t.Helper()
	image := bayBaseImage(t)
	ns := testenv.Unique("sgapi")
	testenv.RemoveNamespace(t, ns)
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
	for _, e := range edit {
		caddyfile = e(caddyfile)
	}
	g := testenv.StartGateway(t, caddyfile, testenv.GatewayOptions{Env: env})
	return &gateway{Gateway: g, url: fmt.Sprintf("http://127.0.0.1:%d", port), dataDir: dataDir, ns: ns, caddyfile: caddyfile}
}

// bayBaseImage builds this tree's base image (testenv.Image, under SANDGATE_IMAGE_REPO when set) for the profiles
// the tests configure. Profiles from BAY_PROFILES and Bay's default profile run bayapi.SandgateBaseImage, the tag
// a deployment ships; where the engine lacks it, this tree's image is tagged under that name. An existing tag is
// never replaced: it may be another checkout's on a shared engine.
func bayBaseImage(t *testing.T) string {
	t.Helper()
	image := testenv.Image(t, "base")
	if image != bayapi.SandgateBaseImage && exec.Command("docker", "image", "inspect", bayapi.SandgateBaseImage).Run() != nil {
		if out, err := exec.Command("docker", "tag", image, bayapi.SandgateBaseImage).CombinedOutput(); err != nil {
			t.Fatalf("tagging %s as %s: %v\n%s", image, bayapi.SandgateBaseImage, err, out)
		}
	}
	return image
}

func readCredentials(t *testing.T, dir string) service.Credentials {
	t.Helper()
	path := filepath.Join(dir, service.CredentialsFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("credentials.json: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials.json mode %v, want 0600", fi.Mode().Perm())
	}
	var c service.Credentials
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

	t.Run("streaming and processes", func(t *testing.T) {
		stream := func(method, path, body string) (*http.Response, error) {
			req, _ := http.NewRequestWithContext(ctx, method, g.url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+creds.APIKey)
			return http.DefaultClient.Do(req)
		}
		resp, err := stream("POST", "/v1/sandboxes/"+sb.ID+"/shell/exec/stream", `{"command":"echo one; echo two >&2"}`)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
			!strings.Contains(string(b), "event: stdout") || !strings.Contains(string(b), "event: stderr") || !strings.Contains(string(b), "event: end") {
			t.Fatalf("exec stream: %d %q", resp.StatusCode, b)
		}
		// A long command: read its start event for the id, leave, signal it, and find it ended.
		resp, err = stream("POST", "/v1/sandboxes/"+sb.ID+"/shell/exec/stream", `{"command":"sleep 120","timeout":300}`)
		if err != nil {
			t.Fatal(err)
		}
		var pid string
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		resp.Body.Close()
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var start struct{ ID string }
				if json.Unmarshal([]byte(data), &start) == nil && start.ID != "" {
					pid = start.ID
					break
				}
			}
		}
		if pid == "" {
			t.Fatalf("no process id in %q", buf[:n])
		}
		var sig map[string]any
		if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/processes/"+pid+"/signal", map[string]string{"signal": "KILL"}, &sig); err != nil {
			t.Fatalf("signal: %v", err)
		}
		resp, err = stream("GET", "/v1/sandboxes/"+sb.ID+"/processes/"+pid+"/output?since=0", "")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "event: end") {
			t.Errorf("resumed output of the killed process: %d %q", resp.StatusCode, b)
		}
		var procs struct {
			Processes []struct{ ID, Status string }
		}
		if err := c.Do(ctx, "GET", "/v1/sandboxes/"+sb.ID+"/processes", nil, &procs); err != nil || len(procs.Processes) == 0 {
			t.Errorf("processes: %+v %v", procs, err)
		}
		var pty struct {
			ID     string `json:"id"`
			WSPath string `json:"ws_path"`
		}
		if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/pty", map[string]any{"cols": 80, "rows": 24}, &pty); err != nil || pty.ID == "" || pty.WSPath == "" {
			t.Errorf("pty: %+v %v", pty, err)
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
	if _, err := os.Stat(filepath.Join(g.dataDir, service.CredentialsFile)); !os.IsNotExist(err) {
		t.Errorf("credentials.json written although api_key is configured")
	}
	sb, err := c.CreateSandbox(ctx, "python-default", 2)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the state AstrBot would see, not for a time: expired, or already collected (not_found).
	for {
		got, err := c.GetSandbox(ctx, sb.ID)
		if err != nil && code(err) != "not_found" {
			t.Fatalf("after ttl: %v", err)
		}
		if err != nil || got.Status == "expired" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("status %q, never expired", got.Status)
		}
		time.Sleep(200 * time.Millisecond)
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
	if _, err := os.Stat(filepath.Join(g.dataDir, service.CredentialsFile)); !os.IsNotExist(err) {
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

// TestReloadAndRestartAgainstGateway checks that a config reload and a process restart keep the generated key
// (stored hashed, not regenerated), the history store and the sandboxes.
func TestReloadAndRestartAgainstGateway(t *testing.T) {
	// on_exit keep: a restart must find the sandbox (the test's cleanup removes the namespace).
	g := startGateway(t, "", nil, true, func(s string) string { return strings.Replace(s, "on_exit destroy", "on_exit keep", 1) })
	creds := readCredentials(t, g.dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if _, err := c.WaitReady(ctx, sb.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(strings.Replace(g.caddyfile, "max_upload 1m", "max_upload 2m", 1)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got, err := c.GetSandbox(ctx, sb.ID); err != nil || got.Status != "ready" {
		t.Fatalf("after reload: %+v %v", got, err)
	}
	g.Stop()
	g.Restart(g.caddyfile)
	if again := readCredentials(t, g.dataDir); again.APIKey != creds.APIKey {
		t.Errorf("the key was regenerated on restart")
	}
	if got, err := c.GetSandbox(ctx, sb.ID); err != nil || got.ID != sb.ID {
		t.Fatalf("after restart: %+v %v", got, err)
	}
}

// TestBrowserAgainstGateway drives the supported agent-browser subset against real Chromium in a browser sandbox,
// and Bay's browser evidence round trips (its test_browser_skill_e2e): a batch's trace_ref fetched back from
// S/browser/traces/{ref} and named by its history entry, learn alone keeping the trace without answering the ref,
// and a failed batch whose answer, history entry and trace agree.
func TestBrowserAgainstGateway(t *testing.T) {
	testenv.Integration(t)
	browserImage := testenv.Image(t, "browser")
	g := startGateway(t, "", nil, true, func(s string) string {
		return strings.Replace(s, "\t\tprofile python-default {", fmt.Sprintf(`		profile browser-python {
			image %s
			capabilities filesystem shell python browser
			memory 1g
		}
		profile python-default {`, browserImage), 1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(g.url, readCredentials(t, g.dataDir).APIKey)
	sb, err := c.CreateSandbox(ctx, "browser-python", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if _, err := c.WaitReady(ctx, sb.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	type step struct {
		Cmd      string `json:"cmd"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	type batchAnswer struct {
		Results        []step  `json:"results"`
		Success        bool    `json:"success"`
		TotalSteps     int     `json:"total_steps"`
		CompletedSteps int     `json:"completed_steps"`
		ExecutionID    string  `json:"execution_id"`
		TraceRef       *string `json:"trace_ref"`
	}
	var batch batchAnswer
	err = c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/browser/exec_batch", map[string]any{"commands": []string{
		"open data:text/html,<title>Hi</title><p>hello world</p>", "get title", "get text", "eval 1+1", "screenshot shots/a.png",
	}, "timeout": 120, "description": "browser batch trace round trip", "tags": "skill:e2e-browser-batch,trace", "learn": true, "include_trace": true}, &batch)
	if err != nil || !batch.Success || batch.CompletedSteps != 5 || batch.TraceRef == nil || !strings.HasPrefix(*batch.TraceRef, "blob:") {
		t.Fatalf("batch: %+v %v", batch, err)
	}
	if batch.Results[1].Stdout != "Hi\n" || !strings.Contains(batch.Results[2].Stdout, "hello world") || batch.Results[3].Stdout != "2\n" {
		t.Errorf("results: %+v", batch.Results)
	}
	resp, err := c.Download(ctx, sb.ID, "shots/a.png", "")
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("screenshot is not a PNG (%d bytes)", len(png))
	}
	var one struct {
		Success  bool    `json:"success"`
		ExitCode int     `json:"exit_code"`
		Error    *string `json:"error"`
	}
	if err := c.Do(ctx, "POST", "/v1/sandboxes/"+sb.ID+"/browser/exec", map[string]any{"cmd": "click #nothing"}, &one); err != nil ||
		one.Success || one.ExitCode != 127 || one.Error == nil {
		t.Errorf("unsupported command: %+v %v", one, err)
	}

	type entry struct {
		ExecType     string  `json:"exec_type"`
		Success      bool    `json:"success"`
		PayloadRef   *string `json:"payload_ref"`
		Description  *string `json:"description"`
		Tags         *string `json:"tags"`
		LearnEnabled bool    `json:"learn_enabled"`
		LearnStatus  *string `json:"learn_status"`
	}
	type trace struct {
		TraceRef string `json:"trace_ref"`
		Trace    struct {
			Kind           string `json:"kind"`
			Steps          []step `json:"steps"`
			Success        bool   `json:"success"`
			TotalSteps     int    `json:"total_steps"`
			CompletedSteps int    `json:"completed_steps"`
		} `json:"trace"`
	}
	S := "/v1/sandboxes/" + sb.ID
	var e entry
	if err := c.Do(ctx, "GET", S+"/history/"+batch.ExecutionID, nil, &e); err != nil || e.ExecType != "browser_batch" || !e.LearnEnabled ||
		e.PayloadRef == nil || *e.PayloadRef != *batch.TraceRef || e.Description == nil || e.Tags == nil || !strings.Contains(*e.Tags, "skill:e2e-browser-batch") {
		t.Errorf("the batch's history entry: %+v %v", e, err)
	}
	var tr trace
	if err := c.Do(ctx, "GET", S+"/browser/traces/"+*batch.TraceRef, nil, &tr); err != nil || tr.TraceRef != *batch.TraceRef ||
		tr.Trace.Kind != "browser_batch_trace" || len(tr.Trace.Steps) != 5 || !strings.Contains(tr.Trace.Steps[2].Stdout, "hello world") {
		t.Errorf("the batch's trace: %+v %v", tr, err)
	}

	// learn alone: no ref answered, the entry keeps it, and it is fetched back by it.
	var learnt struct {
		ExecutionID string  `json:"execution_id"`
		TraceRef    *string `json:"trace_ref"`
	}
	if err := c.Do(ctx, "POST", S+"/browser/exec", map[string]any{"cmd": "open about:blank", "learn": true, "include_trace": false}, &learnt); err != nil ||
		learnt.TraceRef != nil || !strings.HasPrefix(learnt.ExecutionID, "exec-") {
		t.Fatalf("learn only: %+v %v", learnt, err)
	}
	e = entry{}
	// pending until the learning pass, which the run wakes, skips it (one step is no segment)
	if err := c.Do(ctx, "GET", S+"/history/"+learnt.ExecutionID, nil, &e); err != nil || e.PayloadRef == nil || e.LearnStatus == nil ||
		(*e.LearnStatus != "pending" && *e.LearnStatus != "skipped") {
		t.Fatalf("learn only, the entry: %+v %v", e, err)
	}
	tr = trace{}
	if err := c.Do(ctx, "GET", S+"/browser/traces/"+*e.PayloadRef, nil, &tr); err != nil || tr.Trace.Kind != "browser_exec_trace" ||
		len(tr.Trace.Steps) != 1 || tr.Trace.Steps[0].Cmd != "open about:blank" {
		t.Errorf("learn only, the trace: %+v %v", tr, err)
	}

	// A failed batch: answer, history and trace agree.
	var failed batchAnswer
	if err := c.Do(ctx, "POST", S+"/browser/exec_batch", map[string]any{"commands": []string{"open about:blank", "nonexistent-subcommand", "get title"},
		"timeout": 120, "stop_on_error": true, "learn": true, "include_trace": true}, &failed); err != nil || failed.Success || failed.TotalSteps != 3 ||
		failed.CompletedSteps >= 3 || failed.TraceRef == nil {
		t.Fatalf("failed batch: %+v %v", failed, err)
	}
	e, tr = entry{}, trace{}
	if err := c.Do(ctx, "GET", S+"/history/"+failed.ExecutionID, nil, &e); err != nil || e.Success || e.PayloadRef == nil || *e.PayloadRef != *failed.TraceRef {
		t.Errorf("failed batch, the entry: %+v %v", e, err)
	}
	if err := c.Do(ctx, "GET", S+"/browser/traces/"+*failed.TraceRef, nil, &tr); err != nil || tr.Trace.Success || tr.Trace.TotalSteps != 3 ||
		tr.Trace.CompletedSteps != failed.CompletedSteps {
		t.Errorf("failed batch, the trace: %+v %v", tr, err)
	}
	if err := c.Do(ctx, "GET", S+"/browser/traces/blob:missing-trace", nil, nil); status(err) != 404 {
		t.Errorf("an unknown trace: %v", err)
	}
	checkBrowserLearning(t, ctx, c, sb.ID, *batch.TraceRef)
}

// TestCargoAgainstGateway: a cargo is a workspace volume that outlives its sandboxes until it is deleted.
func TestCargoAgainstGateway(t *testing.T) {
	g := startGateway(t, "api_key sk-cargo", nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := client.New(g.url, "sk-cargo")
	var cargo struct {
		ID      string `json:"id"`
		Managed bool   `json:"managed"`
	}
	if err := c.Do(ctx, "POST", "/v1/cargos", map[string]any{"size_limit_mb": 64}, &cargo); err != nil || cargo.Managed {
		t.Fatalf("create cargo: %+v %v", cargo, err)
	}
	use := func() string {
		var sb client.Sandbox
		if err := c.Do(ctx, "POST", "/v1/sandboxes", map[string]any{"profile": "python-default", "cargo_id": cargo.ID, "ttl": 600}, &sb); err != nil {
			t.Fatalf("create with cargo: %v", err)
		}
		if sb.CargoID == nil || *sb.CargoID != cargo.ID {
			t.Errorf("cargo_id %v", sb.CargoID)
		}
		return sb.ID
	}
	first := use()
	if err := c.WriteFile(ctx, first, "keep.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	var conflict *client.Error
	err := c.Do(ctx, "DELETE", "/v1/cargos/"+cargo.ID, nil, nil)
	if !errors.As(err, &conflict) || conflict.Status != 409 || len(conflict.Details["active_sandbox_ids"].([]any)) != 1 {
		t.Fatalf("delete in use: %v", err)
	}
	if err := c.DeleteSandbox(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := use()
	if s, err := c.ReadFile(ctx, second, "keep.txt"); err != nil || s != "kept" {
		t.Errorf("the cargo did not keep the workspace: %q %v", s, err)
	}
	if err := c.DeleteSandbox(ctx, second); err != nil {
		t.Fatal(err)
	}
	volume := g.ns + "-" + cargo.ID
	if exec.Command("docker", "volume", "inspect", volume).Run() != nil {
		t.Fatalf("volume %s missing before the cargo is deleted", volume)
	}
	// The deleted sandbox's container may still be going away: retry the 409 until it is gone (the test's context
	// bounds the wait, not a wall-clock guess at how long removal takes on a busy machine).
	for {
		err = c.Do(ctx, "DELETE", "/v1/cargos/"+cargo.ID, nil, nil)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("delete cargo: %v", err)
	}
	if exec.Command("docker", "volume", "inspect", volume).Run() == nil {
		t.Errorf("volume %s still exists after the cargo was deleted", volume)
	}
}
