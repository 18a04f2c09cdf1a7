package bayapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/buildversion"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// parityGateway runs the API with python-default (crash_limit 1: one death is rebuilt, the second within the window
// leaves the sandbox failed) and python-warm (a warm pool of one).
func parityGateway(t *testing.T) (*gateway, *client.Client) {
	t.Helper()
	g := startGateway(t, "", nil, true, func(cf string) string {
		image := bayBaseImage(t)
		cf = strings.Replace(cf, "\t\t\tidle_timeout 30m\n", "\t\t\tidle_timeout 30m\n\t\t\tcrash_limit 1\n", 1)
		return strings.Replace(cf, "\t\tprofile python-default {", fmt.Sprintf(`		profile python-warm {
			image %s
			capabilities filesystem shell python
			memory 256m
			warm_pool 1
		}
		profile python-default {`, image), 1)
	})
	return g, client.New(g.url, readCredentials(t, g.dataDir).APIKey)
}

func sandboxJSON(t *testing.T, ctx context.Context, c *client.Client, id string) map[string]any {
	t.Helper()
	var sb map[string]any
	if err := c.Do(ctx, http.MethodGet, "/v1/sandboxes/"+id, nil, &sb); err != nil {
		t.Fatalf("GET sandbox %s: %v", id, err)
	}
	return sb
}

// waitSandbox polls GET /v1/sandboxes/{id} (as AstrBot does) until cond holds.
func waitSandbox(t *testing.T, ctx context.Context, c *client.Client, id, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	for {
		sb := sandboxJSON(t, ctx, c, id)
		if cond(sb) {
			return sb
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sandbox %s never became %s: %v", id, what, sb)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestBayParityContract checks the parts of Bay's contract a client sees without a crash: statuses at create,
// containers, versions, the history filter, Idempotency-Key refusal, invalid_path details and cargo volumes.
func TestBayParityContract(t *testing.T) {
	g, c := parityGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("semantic versions", func(t *testing.T) {
		st, version, err := c.Health(ctx)
		if err != nil || st != "ok" || !buildversion.IsSemver(version) || strings.HasPrefix(version, "dev") {
			t.Fatalf("health: %q %q %v", st, version, err)
		}
	})

	var cold string
	t.Run("cold create is idle until usable, then ready", func(t *testing.T) {
		var sb map[string]any
		if err := c.Do(ctx, http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "python-default", "ttl": 600}, &sb); err != nil {
			t.Fatal(err)
		}
		cold = sb["id"].(string)
		if sb["status"] != "idle" || sb["containers"] != nil {
			t.Fatalf("create answered status %v containers %v, want idle and null", sb["status"], sb["containers"])
		}
		seen := map[string]bool{}
		got := waitSandbox(t, ctx, c, cold, "ready", func(sb map[string]any) bool {
			seen[sb["status"].(string)] = true
			if sb["status"] != "ready" && sb["containers"] != nil {
				t.Errorf("containers %v while %v", sb["containers"], sb["status"])
			}
			return sb["status"] == "ready"
		})
		if seen["starting"] {
			t.Errorf("a Bay client saw status starting: %v", seen)
		}
		ctrs, _ := got["containers"].([]any)
		if len(ctrs) != 1 {
			t.Fatalf("containers of a ready sandbox: %v", got["containers"])
		}
		if v, _ := ctrs[0].(map[string]any)["version"].(string); !buildversion.IsSemver(v) {
			t.Errorf("container version %q is not a semantic version", v)
		}
	})

	t.Run("warm claim is ready", func(t *testing.T) {
		// The pool member is usable once its pool counts it ready (the Manager's own probe reached its agent), as the
		// admin endpoint reports it.
		admin := client.New("http://"+g.AdminAddr, "")
		testenv.WaitUntil(t, "the warm pool to fill", func() bool {
			var pools struct {
				Pools []struct {
					Profile string `json:"profile"`
					Ready   int    `json:"ready"`
				} `json:"pools"`
			}
			if err := admin.Do(ctx, http.MethodGet, "/sandbox-pools", nil, &pools); err != nil {
				return false
			}
			for _, p := range pools.Pools {
				if p.Profile == "python-warm" && p.Ready > 0 {
					return true
				}
			}
			return false
		})
		var sb map[string]any
		if err := c.Do(ctx, http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "python-warm"}, &sb); err != nil {
			t.Fatal(err)
		}
		if sb["status"] != "ready" {
			t.Fatalf("warm claim answered status %v", sb["status"])
		}
	})

	t.Run("history last honours exec_type", func(t *testing.T) {
		if _, err := c.Shell(ctx, cold, "echo from-shell", 30); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Python(ctx, cold, "print('from-python')", 30); err != nil {
			t.Fatal(err)
		}
		base := "/v1/sandboxes/" + cold + "/history/last"
		var last map[string]any
		if err := c.Do(ctx, http.MethodGet, base+"?exec_type=shell", nil, &last); err != nil {
			t.Fatal(err)
		}
		if last["exec_type"] != "shell" || !strings.Contains(fmt.Sprint(last["code"]), "from-shell") {
			t.Fatalf("last shell entry: %v", last)
		}
		for _, field := range []string{"id", "session_id", "exec_type", "code", "success", "execution_time_ms", "output", "error",
			"payload_ref", "description", "tags", "notes", "created_at"} {
			if _, ok := last[field]; !ok {
				t.Errorf("history entry lacks %s: %v", field, last)
			}
		}
		if last["payload_ref"] != nil {
			t.Errorf("payload_ref %v, want null", last["payload_ref"])
		}
		if err := c.Do(ctx, http.MethodGet, base, nil, &last); err != nil || last["exec_type"] != "python" {
			t.Fatalf("last entry of any type: %v %v", last, err)
		}
		if err := c.Do(ctx, http.MethodGet, base+"?exec_type=browser", nil, nil); code(err) != "not_found" {
			t.Errorf("no browser execution: %v", err)
		}
		var e *client.Error
		if err := c.Do(ctx, http.MethodGet, base+"?exec_type=perl", nil, nil); !asClientError(err, &e) || e.Status != http.StatusUnprocessableEntity {
			t.Errorf("exec_type perl: %v", err)
		}
	})

	t.Run("malformed Idempotency-Key is 409 and creates nothing", func(t *testing.T) {
		count := func() int {
			var page struct {
				Items []any `json:"items"`
			}
			if err := c.Do(ctx, http.MethodGet, "/v1/sandboxes?limit=200", nil, &page); err != nil {
				t.Fatal(err)
			}
			return len(page.Items)
		}
		before := count()
		for _, key := range []string{"has space", "semi;colon", strings.Repeat("k", 129), "ключ"} {
			err := c.Do(ctx, http.MethodPost, "/v1/sandboxes", map[string]any{"profile": "python-default"}, nil, "Idempotency-Key", key)
			var e *client.Error
			if !asClientError(err, &e) || e.Status != http.StatusConflict || e.Code != "conflict" || e.Details["key"] != key {
				t.Errorf("key %q: %v", key, err)
			}
		}
		if after := count(); after != before {
			t.Errorf("refused keys created sandboxes: %d -> %d", before, after)
		}
		var sb map[string]any
		if err := c.Do(ctx, http.MethodPost, "/v1/cargos", map[string]any{}, &sb, "Idempotency-Key", strings.Repeat("k", 128)); err != nil {
			t.Errorf("a 128-character key: %v", err)
		}
	})

	t.Run("invalid_path details are field and reason", func(t *testing.T) {
		var e *client.Error
		err := c.Do(ctx, http.MethodGet, "/v1/sandboxes/"+cold+"/filesystem/files?path=/etc/passwd", nil, nil)
		if !asClientError(err, &e) || e.Status != 400 || e.Code != "invalid_path" || e.Details["field"] != "path" ||
			e.Details["reason"] != "absolute_path" || len(e.Details) != 2 {
			t.Errorf("absolute path: %v %v", err, detailsOf(err))
		}
		err = c.Do(ctx, http.MethodPost, "/v1/sandboxes/"+cold+"/shell/exec", map[string]any{"command": "pwd", "cwd": "../up"}, nil)
		if !asClientError(err, &e) || e.Code != "invalid_path" || e.Details["field"] != "cwd" || e.Details["reason"] != "path_traversal" {
			t.Errorf("escaping cwd: %v %v", err, detailsOf(err))
		}
	})

	t.Run("a cargo's volume exists right after create", func(t *testing.T) {
		var cargo map[string]any
		if err := c.Do(ctx, http.MethodPost, "/v1/cargos", map[string]any{"size_limit_mb": 64}, &cargo); err != nil {
			t.Fatal(err)
		}
		vol := g.ns + "-" + cargo["id"].(string)
		if out, err := exec.Command("docker", "volume", "inspect", "-f", "{{.Name}}", vol).CombinedOutput(); err != nil {
			t.Fatalf("volume %s after POST /v1/cargos: %v %s", vol, err, out)
		}
		if err := c.Do(ctx, http.MethodDelete, "/v1/cargos/"+cargo["id"].(string), nil, nil); err != nil {
			t.Fatal(err)
		}
		if exec.Command("docker", "volume", "inspect", vol).Run() == nil {
			t.Errorf("volume %s outlived its cargo", vol)
		}
	})
}

func asClientError(err error, e **client.Error) bool {
	ce, ok := err.(*client.Error)
	if ok {
		*e = ce
	}
	return ok
}

func detailsOf(err error) map[string]any {
	if ce, ok := err.(*client.Error); ok {
		return ce.Details
	}
	return nil
}

// TestBayCrashRecovery kills sandboxes as an OOM and `docker kill` do: the next call answers a retryable 503 naming
// the reason and rebuilds the sandbox on its workspace (same id, same files), the reason stays in last_error,
// events' metrics count it, and the second death within the window passes python-default's crash limit of 1.
func TestBayCrashRecovery(t *testing.T) {
	g, c := parityGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	create := func() string {
		sb, err := c.CreateSandbox(ctx, "python-default", 900)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFile(ctx, sb.ID, "keep/notes.txt", "survives "+sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Python(ctx, sb.ID, "state = 41", 30); err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	// recovered checks the first call after a death, then waits for the rebuilt sandbox to answer.
	recovered := func(id, reason string) {
		t.Helper()
		sb := waitSandbox(t, ctx, c, id, "dead ("+reason+")", func(sb map[string]any) bool {
			le, _ := sb["last_error"].(string)
			return strings.Contains(le, reason)
		})
		if sb["status"] != "idle" {
			t.Errorf("a dead sandbox within its crash limit reads %v", sb["status"])
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/sandboxes/"+id+"/python/exec",
			strings.NewReader(`{"code":"print(open('keep/notes.txt').read())"}`))
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(body), `"session_not_ready"`) || !strings.Contains(string(body), `"reason":"`+reason+`"`) ||
			!strings.Contains(string(body), `"recovering":true`) {
			t.Fatalf("first call after the death (%s): %d %s", reason, resp.StatusCode, body)
		}
		for {
			res, err := c.Python(ctx, id, "print(open('keep/notes.txt').read()); print('state' in globals())", 30)
			if err == nil {
				if !strings.Contains(res.Output, "survives "+id) || !strings.Contains(res.Output, "False") {
					t.Fatalf("after the rebuild: %+v", res)
				}
				break
			}
			if code(err) != "session_not_ready" || ctx.Err() != nil {
				t.Fatalf("while rebuilding: %v", err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		sb = sandboxJSON(t, ctx, c, id)
		if sb["status"] != "ready" || sb["id"] != id || !strings.Contains(fmt.Sprint(sb["last_error"]), reason) {
			t.Errorf("after the rebuild: %v", sb)
		}
	}

	killed := create()
	if out, err := exec.Command("docker", "kill", testenv.ContainerOf(t, g.ns, killed)).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	recovered(killed, "sigkill")

	// An OOM that takes the agent (the kernel picks it: its oom_score_adj is raised). The agent is non-dumpable, so
	// its /proc files belong to root: the test raises it from the host, through the container's init.
	oom := create()
	ctr := testenv.ContainerOf(t, g.ns, oom)
	initPID, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", ctr).Output()
	if err != nil {
		t.Fatalf("the container's init: %v", err)
	}
	if out, err := exec.Command("sh", "-c", fmt.Sprintf(
		`for p in $(cat /proc/%s/task/*/children); do echo 1000 > /proc/$p/oom_score_adj; done`, strings.TrimSpace(string(initPID)))).CombinedOutput(); err != nil {
		t.Fatalf("raising the agent's oom_score_adj: %v %s", err, out)
	}
	_ = exec.Command("docker", "exec", ctr, "python3", "-c", "b = bytearray(2 * 1024**3)").Run() // killed with the container
	recovered(oom, "oom")

	// The second death of the first sandbox inside the window passes crash_limit 1: it stays failed.
	if out, err := exec.Command("docker", "kill", testenv.ContainerOf(t, g.ns, killed)).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	sb := waitSandbox(t, ctx, c, killed, "failed", func(sb map[string]any) bool { return sb["status"] == "failed" })
	if le := fmt.Sprint(sb["last_error"]); !strings.Contains(le, "crash loop") || !strings.Contains(le, "sigkill") {
		t.Errorf("last_error of a crash-looped sandbox: %s", le)
	}
	_, err = c.Python(ctx, killed, "1", 30)
	var e *client.Error
	if !asClientError(err, &e) || e.Status != http.StatusGone || e.Code != "container_died" || e.Details["reason"] != "sigkill" {
		t.Fatalf("a call to a crash-looped sandbox: %v %v", err, detailsOf(err))
	}

	// The counters follow the lifecycle's events, delivered after the state change the calls above saw: wait for them.
	wants := []string{`deaths_total{reason="sigkill"} 2`, `deaths_total{reason="oom"} 1`,
		`recoveries_total{reason="sigkill"} 1`, `recoveries_total{reason="oom"} 1`, `crash_loops_total 1`}
	for {
		resp, err := http.Get("http://" + g.AdminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var missing []string
		for _, want := range wants {
			if !strings.Contains(string(metrics), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("metrics lack %v", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
