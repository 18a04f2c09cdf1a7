package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

func nodeExec(t *testing.T, sb *testenv.Sandbox, code string, timeoutMS int64) agentapi.NodeExecResult {
	t.Helper()
	return kernelExec(t, sb, "node", code, timeoutMS)
}

func resultOf(t *testing.T, res agentapi.NodeExecResult) string {
	t.Helper()
	if !res.Success || res.Result == nil {
		t.Fatalf("exec failed: %+v %+v", res, res.Error)
	}
	return *res.Result
}

func getJSON(t *testing.T, sb *testenv.Sandbox, path string, into any) int {
	t.Helper()
	req, _ := sb.Request(context.Background(), http.MethodGet, path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode
}

// TestNodeKernelInSandbox: the Node kernel in a hardened node-image sandbox keeps state across calls, awaits a
// returned Promise, captures console output, and survives a synchronous infinite loop. Under runc and under gVisor.
func TestNodeKernelInSandbox(t *testing.T) {
	eachRuntime(t, nodeKernelInSandbox)
}

func nodeKernelInSandbox(t *testing.T, runtime string) {
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "node", Capabilities: []string{"node"}, Runtime: runtime})
	nodeExec(t, sb, "const fs = require('fs'); let counter = 1; function bump() { return ++counter }", 0)
	if got := resultOf(t, nodeExec(t, sb, "bump(); bump()", 0)); got != "3" {
		t.Fatalf("state across calls: %s", got)
	}
	res := nodeExec(t, sb, "console.log('writing'); fs.writeFileSync('/workspace/n.txt', 'hi'); new Promise(r => setTimeout(() => r({ok: counter}), 50))", 0)
	if got := resultOf(t, res); got != "{ ok: 3 }" || res.Stdout != "writing\n" || res.Images == nil {
		t.Fatalf("awaited promise: %+v", res)
	}
	res = nodeExec(t, sb, "for (;;) {}", 500)
	if !res.TimedOut || res.KernelRestarted || res.Error == nil {
		t.Fatalf("sync loop: %+v", res)
	}
	if got := resultOf(t, nodeExec(t, sb, "const data = await fs.promises.readFile('/workspace/n.txt', 'utf8'); data + counter", 0)); got != "'hi3'" {
		t.Fatalf("after timeout: %s", got)
	}
	// Bad input is refused with a typed error.
	req, _ := sb.Request(context.Background(), http.MethodPost, "/v1/node/exec", strings.NewReader(`{"code":"1","timeout_ms":999999999}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("timeout out of range: %s", resp.Status)
	}
}

// TestNodeExecWithoutNode: where node is missing, the route says so.
func TestNodeExecWithoutNode(t *testing.T) {
	// Every image ships node now: a PATH without /usr/bin stands for an image without it (the agent itself is
	// started by its absolute path).
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Env: []string{"PATH=/usr/local/bin"}})
	req, _ := sb.Request(context.Background(), http.MethodPost, "/v1/node/exec", strings.NewReader(`{"code":"1"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env agentapi.Envelope
	json.NewDecoder(resp.Body).Decode(&env)
	if resp.StatusCode != http.StatusNotImplemented || env.Error == nil || !strings.Contains(env.Error.Message, "node") {
		t.Fatalf("%s %+v", resp.Status, env.Error)
	}
}

func customEnv(t *testing.T, init []string, svcs []agentapi.ServiceSpec, deps *agentapi.Dependencies, m *agentapi.Mirrors) []string {
	t.Helper()
	var env []string
	add := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, name+"="+string(b))
	}
	if init != nil {
		add(agentapi.EnvInit, init)
	}
	if svcs != nil {
		add(agentapi.EnvServices, svcs)
	}
	if deps != nil {
		add(agentapi.EnvDependencies, deps)
	}
	if m != nil {
		add(agentapi.EnvMirrors, m)
	}
	return env
}

// waitHealth polls /health until it leaves "starting" and returns the final status, body and the states seen.
func waitHealth(t *testing.T, sb *testenv.Sandbox, limit time.Duration) (int, map[string]any, []string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var seen []string
	for time.Now().Before(deadline) {
		resp, err := http.Get(sb.URL + "/health")
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		status, _ := body["status"].(string)
		if len(seen) == 0 || seen[len(seen)-1] != status {
			seen = append(seen, status)
		}
		if status != agentapi.StartupStarting {
			return resp.StatusCode, body, seen
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("still starting after %s (seen %v)", limit, seen)
	return 0, nil, nil
}

// TestCustomisedSandbox: mirrors point pip and npm at the test's registries; a Python and a Node dependency are
// installed before /health turns ready; the init script's effect is there at the first exec; a service killed with
// kill -9 comes back and answers on its port.
func TestCustomisedSandbox(t *testing.T) {
	testenv.Integration(t)
	reg := testenv.StartRegistries(t)
	m := &agentapi.Mirrors{NPMRegistry: reg.URL + "/", PyPIIndexURL: reg.URL + "/simple/", AptMirror: "http://deb.example/debian"}
	deps := &agentapi.Dependencies{Python: map[string]string{testenv.RegistryPyPackage: "1.0.0"}, Node: map[string]string{testenv.RegistryNodePackage: "^1.0.0"}}
	env := customEnv(t,
		[]string{"echo \"init ran as $(id -u)\" > /workspace/init.txt", "python3 -c 'import sgdemo; print(sgdemo.VALUE)' >> /workspace/init.txt"},
		[]agentapi.ServiceSpec{{Name: "web", Command: "cd /workspace && exec python3 -m http.server $PORT", Port: 8000}},
		deps, m)
	began := time.Now()
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "node", Capabilities: []string{"node"}, Env: env, NoWait: true})
	code, body, seen := waitHealth(t, sb, 3*time.Minute)
	if code != http.StatusOK {
		var l agentapi.InitLog
		getJSON(t, sb, "/v1/init/log", &l)
		t.Fatalf("health %d %v; init log %+v", code, body, l)
	}
	t.Logf("ready after %s (health states %v); registry requests %v", time.Since(began), seen, reg.Requests())

	// First exec: the init script ran (after the Python dependency, as the sandbox user) and both packages import.
	res := nodeExec(t, sb, "require('fs').readFileSync('/workspace/init.txt', 'utf8') + require('sg-demo').value", 0)
	if got := resultOf(t, res); got != "'init ran as 65532\\n42\\n7'" {
		t.Fatalf("init effect and node dependency: %s", got)
	}
	if got := resultOf(t, nodeExec(t, sb, "require('child_process').execSync(\"python3 -c 'import sgdemo; print(sgdemo.VALUE)'\").toString()", 0)); got != "'42\\n'" {
		t.Fatalf("python dependency from a process: %s", got)
	}
	// The Python kernel (started by another part of the agent) sees the dependency too.
	pyBody, _ := json.Marshal(map[string]any{"code": "import sgdemo\nsgdemo.VALUE"})
	req, _ := sb.Request(context.Background(), http.MethodPost, "/v1/python/exec", bytes.NewReader(pyBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var py agentapi.PythonExecResult
	json.NewDecoder(resp.Body).Decode(&py)
	resp.Body.Close()
	if !py.Success || py.Result == nil || *py.Result != "42" {
		t.Fatalf("python kernel import: %+v %+v", py, py.Error)
	}

	// Mirror files in HOME hold the configured URLs; apt was skipped because /etc is read-only.
	npmrc := sb.Exec(t, "cat", "/home/sandbox/.npmrc")
	pipconf := sb.Exec(t, "cat", "/home/sandbox/.config/pip/pip.conf")
	uv := sb.Exec(t, "cat", "/home/sandbox/.config/uv/uv.toml")
	host := strings.TrimPrefix(reg.URL, "http://")
	host = host[:strings.LastIndex(host, ":")]
	if npmrc != "registry="+reg.URL+"/\n" || pipconf != fmt.Sprintf("[global]\nindex-url = %s/simple/\ntrusted-host = %s\n", reg.URL, host) ||
		!strings.Contains(uv, `default-index = "`+reg.URL+`/simple/"`) {
		t.Fatalf("mirror files:\n%s\n%s\n%s", npmrc, pipconf, uv)
	}
	var l agentapi.InitLog
	getJSON(t, sb, "/v1/init/log", &l)
	if l.Status != "ok" || len(l.Steps) != 5 || !strings.Contains(l.Steps[0].Output, "apt: skipped: /etc/apt/sources.list.d is not writable") {
		t.Fatalf("init log: %+v", l)
	}

	// The service answers on its port; kill -9 brings it back.
	var svcs struct {
		Services []agentapi.ServiceStatus `json:"services"`
	}
	getJSON(t, sb, "/v1/services", &svcs)
	if len(svcs.Services) != 1 || svcs.Services[0].State != "running" || svcs.Services[0].PID == 0 {
		t.Fatalf("services: %+v", svcs)
	}
	appURL := fmt.Sprintf("http://%s:8000/init.txt", sb.IP)
	if err := testenv.WaitHTTP(context.Background(), appURL, 10*time.Second); err != nil {
		t.Fatalf("service not reachable: %v", err)
	}
	sb.Exec(t, "kill", "-9", fmt.Sprint(svcs.Services[0].PID))
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		getJSON(t, sb, "/v1/services", &svcs)
		s := svcs.Services[0]
		if s.Restarts == 1 && s.State == "running" && s.PID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service not restarted: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := testenv.WaitHTTP(context.Background(), appURL, 10*time.Second); err != nil {
		t.Fatalf("service not reachable after restart: %v", err)
	}
	// And through the agent's port proxy, which the gateway's /app route uses.
	preq, _ := sb.Request(context.Background(), http.MethodGet, "/proxy/8000/init.txt", nil)
	presp, err := http.DefaultClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	pbody, _ := io.ReadAll(presp.Body)
	presp.Body.Close()
	if presp.StatusCode != http.StatusOK || !strings.HasPrefix(string(pbody), "init ran as 65532") {
		t.Fatalf("through /proxy/8000/: %s %q", presp.Status, pbody)
	}
}

// TestBogusDependencyFails: a package the index does not have ends the start-up failed, /health carrying pip's
// own message.
func TestBogusDependencyFails(t *testing.T) {
	testenv.Integration(t)
	reg := testenv.StartRegistries(t)
	env := customEnv(t, []string{"touch /workspace/should-not-run"}, nil,
		&agentapi.Dependencies{Python: map[string]string{"sgdoesnotexist": "9.9"}},
		&agentapi.Mirrors{PyPIIndexURL: reg.URL + "/simple/"})
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "node", Env: env, NoWait: true})
	code, body, _ := waitHealth(t, sb, 2*time.Minute)
	msg, _ := body["error"].(string)
	if code != http.StatusServiceUnavailable || body["status"] != "failed" || !strings.Contains(msg, "sgdoesnotexist==9.9") ||
		!strings.Contains(msg, "No matching distribution found") {
		t.Fatalf("health %d %v", code, body)
	}
	var l agentapi.InitLog
	getJSON(t, sb, "/v1/init/log", &l)
	last := l.Steps[len(l.Steps)-1]
	if l.Status != "failed" || last.Name != "python dependencies" || last.ExitCode == 0 || !strings.Contains(last.Output, "sgdoesnotexist") {
		t.Fatalf("init log %+v", l)
	}
	if out := sb.Exec(t, "ls", "/workspace"); strings.Contains(out, "should-not-run") {
		t.Fatal("init ran after the failed install")
	}
}

// TestProfileImagesBakeAptPackages: apt dependencies become a derived image (scripts/profile-images.sh), because a
// running sandbox cannot use apt; the tool is there for the sandbox user. Option-like node packages are refused the
// same way (baking node packages: TestProfileImagesNodeThroughInterceptingTLS).
func TestProfileImagesBakeAptPackages(t *testing.T) {
	base := testenv.Image(t, "base")
	repo := testenv.Unique("sgprofile")
	profiles := filepath.Join(t.TempDir(), "profiles.json")
	doc := `[{"id":"aptdemo","image":"` + base + `","dependencies":{"apt":["jq"]}},{"id":"plain","image":"` + base + `"}]`
	if err := os.WriteFile(profiles, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), profiles)
	cmd.Env = append(os.Environ(), "SANDGATE_IMAGE_REPO="+repo)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", repo+":profile-aptdemo").Run() })
	if err != nil {
		t.Fatalf("profile-images.sh: %v\n%s", err, out)
	}
	got, err := exec.Command("docker", "run", "--rm", "--read-only", "--user", "65532:65532", "--entrypoint", "jq", repo+":profile-aptdemo", "-n", "1+1").CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "2" {
		t.Fatalf("jq in the derived image: %v %s", err, got)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`[{"id":"x","image":"`+base+`","dependencies":{"apt":["-o=APT::Update::Pre-Invoke::=id"]}}]`), 0o644)
	if out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "bad apt package") {
		t.Fatalf("option-like package accepted: %v %s", err, out)
	}
	os.WriteFile(bad, []byte(`[{"id":"x","image":"`+base+`","dependencies":{"node":{"--registry=http://evil":"1"}}}]`), 0o644)
	if out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "profile-images.sh"), bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "bad node package") {
		t.Fatalf("option-like node package accepted: %v %s", err, out)
	}
}
