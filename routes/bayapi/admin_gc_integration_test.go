package bayapi_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

type gcRunJSON struct {
	Results []struct {
		TaskName     string   `json:"task_name"`
		CleanedCount int      `json:"cleaned_count"`
		Errors       []string `json:"errors"`
	} `json:"results"`
	TotalCleaned int `json:"total_cleaned"`
	TotalErrors  int `json:"total_errors"`
}

func (r gcRunJSON) cleaned(task string) int {
	for _, t := range r.Results {
		if t.TaskName == task {
			return t.CleanedCount
		}
	}
	return -1
}

// TestAdminGCAgainstGateway runs Bay's POST /v1/admin/gc/run on a real gateway whose own collection loop is slowed
// to an hour, so only the call acts: a sandbox past its idle deadline is stopped and keeps its workspace (a file
// written before reads back after), an orphaned managed cargo volume (what a remove cut off half way leaves) is
// removed, and a cargo made with POST /v1/cargos (external) stays. A tenant's key is refused with 403 and stops
// nothing.
func TestAdminGCAgainstGateway(t *testing.T) {
	g := startGateway(t, "key sk-ops ops admin", nil, true, func(s string) string {
		s = strings.Replace(s, "gc_interval 1s", "gc_interval 1h\n\t\torphan_min_age 1s", 1)
		return strings.Replace(s, "idle_timeout 30m", "idle_timeout 3s", 1)
	})
	creds := readCredentials(t, g.dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := client.New(g.url, creds.APIKey)
	ops := client.New(g.url, "sk-ops")
	sb, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), sb.ID) })
	if _, err := c.WaitReady(ctx, sb.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Shell(ctx, sb.ID, "echo kept > data.txt", 30); err != nil || r.ExitCode != 0 {
		t.Fatalf("writing the file: %+v %v", r, err)
	}
	var external struct {
		ID string `json:"id"`
	}
	if err := c.Do(ctx, "POST", "/v1/cargos", map[string]any{}, &external); err != nil || external.ID == "" {
		t.Fatalf("external cargo: %+v %v", external, err)
	}
	t.Cleanup(func() { _ = c.Do(context.Background(), "DELETE", "/v1/cargos/"+external.ID, nil, nil) })

	// The orphan: a managed cargo volume of this gateway (its labels, read off the sandbox's container) that no
	// sandbox records.
	instance := inspect(t, "container", g.ns+"-"+sb.ID, `{{index .Config.Labels "`+g.ns+`.instance"}}`)
	orphan := g.ns + "-ws-orphan000001"
	if out, err := exec.Command("docker", "volume", "create", "--label", g.ns+".managed=true", "--label", g.ns+".instance="+instance,
		"--label", g.ns+".managed_workspace=true", orphan).CombinedOutput(); err != nil {
		t.Fatalf("making the orphan volume: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", orphan).Run() })

	// Wait for the idle deadline to pass (observable in the sandbox's detail); the loop, an hour away, does not act.
	testenv.WaitUntil(t, "the idle deadline to pass", func() bool {
		s, err := c.GetSandbox(ctx, sb.ID)
		return err == nil && s.IdleExpiresAt != nil && time.Now().After(*s.IdleExpiresAt)
	})
	if err := c.Do(ctx, "POST", "/v1/admin/gc/run", map[string]any{}, nil); status(err) != 403 {
		t.Fatalf("a tenant's gc: %v", err)
	}
	if s, err := c.GetSandbox(ctx, sb.ID); err != nil || s.Status != "ready" {
		t.Fatalf("before the admin's gc: %+v %v", s, err)
	}
	if err := c.Do(ctx, "GET", "/v1/admin/gc/status", nil, nil); status(err) != 403 {
		t.Fatalf("a tenant's gc status: %v", err)
	}
	var st struct {
		Enabled         bool                       `json:"enabled"`
		IsRunning       bool                       `json:"is_running"`
		InstanceID      string                     `json:"instance_id"`
		IntervalSeconds int                        `json:"interval_seconds"`
		Tasks           map[string]map[string]bool `json:"tasks"`
	}
	if err := ops.Do(ctx, "GET", "/v1/admin/gc/status", nil, &st); err != nil || !st.Enabled || st.IsRunning || st.InstanceID != instance ||
		st.IntervalSeconds != 3600 || !st.Tasks["orphan_cargo"]["enabled"] || !st.Tasks["idle_session"]["enabled"] {
		t.Fatalf("gc status: %+v %v", st, err)
	}
	// Bay's own tests name their tasks (its conftest's trigger_gc): only those are answered.
	var rep gcRunJSON
	if err := ops.Do(ctx, "POST", "/v1/admin/gc/run", map[string]any{"tasks": []string{"idle_session", "orphan_cargo"}}, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.cleaned("idle_session") != 1 || rep.cleaned("orphan_cargo") != 1 || rep.TotalErrors != 0 {
		t.Fatalf("gc answer: %+v", rep)
	}
	if s, err := c.GetSandbox(ctx, sb.ID); err != nil || s.Status != "idle" || s.IdleExpiresAt != nil {
		t.Fatalf("after gc: %+v %v", s, err)
	}
	if exec.Command("docker", "volume", "inspect", orphan).Run() == nil {
		t.Errorf("the orphan managed cargo %s is still there", orphan)
	}
	if err := c.Do(ctx, "GET", "/v1/cargos/"+external.ID, nil, nil); err != nil {
		t.Errorf("the external cargo is gone: %v", err)
	}
	if exec.Command("docker", "volume", "inspect", g.ns+"-"+external.ID).Run() != nil {
		t.Errorf("the external cargo's volume is gone")
	}
	// The workspace was kept: the file reads back from a fresh container.
	if r, err := c.Shell(ctx, sb.ID, "cat data.txt", 60); err != nil || strings.TrimSpace(r.Output) != "kept" {
		t.Fatalf("the workspace after idle gc: %+v %v", r, err)
	}

	// Bay's test_gc_concurrent_sandbox_delete_idempotent, made concurrent for real: a sandbox is deleted while an
	// admin's collection runs. Both succeed, the collection reports no error, the sandbox and its managed cargo are
	// gone, and a second collection finds nothing left to fail on.
	gone, err := c.CreateSandbox(ctx, "python-default", 600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.Background(), gone.ID) })
	if _, err := c.WaitReady(ctx, gone.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	volume := inspect(t, "container", g.ns+"-"+gone.ID, `{{range .Mounts}}{{if eq .Destination "/workspace"}}{{.Name}}{{end}}{{end}}`)
	var wg sync.WaitGroup
	var delErr, gcErr error
	var during gcRunJSON
	wg.Add(2)
	go func() { defer wg.Done(); delErr = c.DeleteSandbox(ctx, gone.ID) }()
	go func() {
		defer wg.Done()
		gcErr = ops.Do(ctx, "POST", "/v1/admin/gc/run", nil, &during) // every task: none may fail on the sandbox going
	}()
	wg.Wait()
	if delErr != nil || gcErr != nil || during.TotalErrors != 0 {
		t.Fatalf("delete during gc: delete %v, gc %+v %v", delErr, during, gcErr)
	}
	if _, err := c.GetSandbox(ctx, gone.ID); code(err) != "not_found" {
		t.Errorf("the deleted sandbox: %v", err)
	}
	var after gcRunJSON
	if err := ops.Do(ctx, "POST", "/v1/admin/gc/run", nil, &after); err != nil || after.TotalErrors != 0 {
		t.Fatalf("gc after the delete: %+v %v", after, err)
	}
	testenv.WaitUntil(t, "the deleted sandbox's managed cargo volume to go", func() bool {
		return exec.Command("docker", "volume", "inspect", volume).Run() != nil
	})
}

func inspect(t *testing.T, kind, name, format string) string {
	t.Helper()
	out, err := exec.Command("docker", kind, "inspect", "-f", format, name).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("docker %s inspect %s: %v\n%s", kind, name, err, out)
	}
	return strings.TrimSpace(string(out))
}
