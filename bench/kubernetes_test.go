package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// Iterations of BenchmarkKubernetes, each after one warm-up that is not counted. Cold creates and kubectl runs
// alternate, as do the three exec paths, so a change in the shared machine's load falls on both sides alike.
const (
	k8sColdRuns = 10
	k8sWarmRuns = 10
	k8sExecRuns = 30
)

// The profile both sides run: our base image with the test profile's resources (cluster_test.go's), and on the
// baseline's side the same limits and requests the driver gives a sandbox (CPU request: the driver's default).
const (
	k8sCPULimit   = "500m"
	k8sCPURequest = "100m"
	k8sMemory     = "256Mi"
)

// kbench is the real gateway binary on the kubernetes driver, in a Kubernetes namespace of its own, and the
// cluster's own kubectl beside it.
type kbench struct {
	b     *testing.B
	kube  *testenv.Kube
	ns    string // the Kubernetes namespace of every Pod of the run, the gateway's and the baseline's
	image string
	gw    *testenv.Gateway
	api   *client.Client
}

// BenchmarkKubernetes is issue 20's benchmark on the test cluster (docs/kubernetes.md, "Benchmark"), all in one
// run and against baselines measured in that run:
//
//   - create to ready, cold (POST /v1/sandboxes of a profile without a warm pool, polled until status ready: the
//     Manager's probe reached the agent) against `kubectl run` of the same image with the same resources and
//     `imagePullPolicy: Never`, then `kubectl wait --for=condition=Ready`; and against the same Pod with a fresh
//     PVC like the workspace's, to show what the storage costs;
//   - create to ready, warm (a claim from a filled warm pool of one) against `kubectl run`;
//   - exec of `true` through the gateway (shell/exec: client -> Caddy -> API -> agent at the Pod IP) against
//     `kubectl exec <pod> -- true` on the same Pod, and the agent's exec API called directly (the gateway's last
//     hop), with the same `bash -c true` and with `true` alone;
//   - the launch steps of the cold creates, from the gateway's debug log;
//   - the cluster's memory (RSS of each component) idle and while the bench runs.
//
// "Through the gateway" is the real fleet binary (testenv.KubeCaddyBinary: the gateway built with the Kubernetes
// module) with `driver kubernetes` and the HTTP API.
// It skips without a cluster (SANDGATE_K8S_KUBECONFIG); `make bench-k8s` brings one up. SANDGATE_K8S_MODE chooses
// the driver's mode (pods, the default, or agent_sandbox: the cluster's agent-sandbox controller runs the Pods).
// Run by hand:
//
//	eval "$(scripts/cluster.sh env)"; go test -run '^$' -bench Kubernetes -benchtime 1x -timeout 60m ./bench
func BenchmarkKubernetes(b *testing.B) {
	kube := testenv.KubeCluster(b)
	var rss *clusterRSS
	var idle map[string]float64
	var idleN int
	if kube.State != "" {
		// Idle: nothing of this run exists yet (other users of a shared cluster may still be busy: see the load).
		rss = newClusterRSS(kube.State)
		s := rss.startSampling(200 * time.Millisecond)
		time.Sleep(2 * time.Second) // a sampling window, not a wait for a state
		idle, _, idleN = s.finish()
	}
	load0 := loadAverage()
	k := &kbench{b: b, kube: kube, ns: kube.Namespace(b, "sgkb"), image: testenv.KubeImage("base")}
	var busy *rssSampler
	if rss != nil {
		busy = rss.startSampling(500 * time.Millisecond)
	}
	k.startGateway()

	cold, coldBase, coldPVC, coldIDs := k.coldVsRun()
	warm, warmBase := k.warmVsRun()
	viaAPI, viaAgentShell, viaAgent, viaKubectl, kubectlGet := k.execs()

	load1 := loadAverage()
	pct := func(d []time.Duration, q float64) float64 { return ms(testenv.Percentile(d, q)) }
	ratio := func(a, base []time.Duration) float64 {
		return float64(testenv.Percentile(a, .5)) / float64(testenv.Percentile(base, .5))
	}
	b.ReportMetric(pct(cold, .5), "cold-p50-ms")
	b.ReportMetric(pct(warm, .5), "warm-p50-ms")
	b.ReportMetric(pct(coldBase, .5), "kubectl-run-p50-ms")
	b.ReportMetric(ratio(cold, coldBase), "cold/kubectl-run")
	b.ReportMetric(ratio(cold, coldPVC), "cold/kubectl-pod-pvc")
	b.ReportMetric(ratio(warm, warmBase), "warm/kubectl-run")
	b.ReportMetric(pct(viaAPI, .5), "gateway-exec-p50-ms")
	b.ReportMetric(pct(viaKubectl, .5), "kubectl-exec-p50-ms")
	b.ReportMetric(ratio(viaAPI, viaKubectl), "gateway-exec/kubectl-exec")
	b.ReportMetric(ratio(viaAPI, viaAgentShell), "gateway-exec/agent-exec")

	var out strings.Builder
	fmt.Fprintf(&out, "Kubernetes benchmark (test cluster %s, driver mode %s, image %s, cpu %s/%s, memory %s)\n", testenv.KubeVersion,
		k8sMode(), k.image, k8sCPURequest, k8sCPULimit, k8sMemory)
	fmt.Fprintf(&out, "load average at start %s, at end %s\n", load0, load1)
	fmt.Fprintf(&out, "%-56s %4s %9s %9s %9s\n", "", "runs", "p50 ms", "p90 ms", "ratio")
	row := func(name string, d, base []time.Duration) {
		r := ""
		if base != nil {
			r = fmt.Sprintf("%.3gx", ratio(d, base))
		}
		fmt.Fprintf(&out, "%-56s %4d %9.1f %9.1f %9s\n", name, len(d), pct(d, .5), pct(d, .9), r)
	}
	row("cold create to ready (gateway API)", cold, coldBase)
	row("  baseline: kubectl run + wait Ready (alternating)", coldBase, nil)
	row("cold create to ready, against baseline 2", cold, coldPVC)
	row("  baseline 2: kubectl apply Pod + fresh PVC + wait Ready", coldPVC, nil)
	row("warm claim to ready (gateway API, pool of 1)", warm, warmBase)
	row("  baseline: kubectl run + wait Ready (alternating)", warmBase, nil)
	row("exec `true` through the gateway (shell/exec)", viaAPI, viaKubectl)
	row("  the same `bash -c true` at the agent's exec API directly", viaAgentShell, viaKubectl)
	row("  `true` (argv, no shell) at the agent's exec API directly", viaAgent, viaKubectl)
	row("  baseline: kubectl exec <pod> -- true", viaKubectl, nil)
	row("  the CLI's floor: kubectl get pod <pod> (start, one call)", kubectlGet, nil)
	fmt.Fprintf(&out, "cold launch steps in the gateway, p50 each: %s\n", launchSteps(k.gw.Logs(), coldIDs))
	if busy != nil {
		med, peak, n := busy.finish()
		out.WriteString(footprintTable(idle, med, peak, idleN, n) + "\n")
		b.ReportMetric(idle["total"], "cluster-rss-idle-MiB")
		b.ReportMetric(peak["total"], "cluster-rss-peak-MiB")
	} else {
		out.WriteString("cluster RSS: the cluster's state directory is not on this machine\n")
	}
	fmt.Fprint(os.Stdout, out.String())
}

// startGateway runs the caddy binary with the kubernetes driver on the run's namespace and two profiles of the same
// resources: cold (no pool) and warm (a pool of exactly one member).
func (k *kbench) startGateway() {
	port := testenv.FreePort(k.b)
	const key = "sk-bench-k8s"
	profile := func(name, extra string) string {
		return fmt.Sprintf(`		profile %s {
			image %s
			capabilities filesystem shell python
			cpus 0.5
			memory 256m
			disk 64m
%s		}
`, name, k.image, extra)
	}
	// The Manager's launch steps are debug records of the sandboxes app's logger: one log takes them (and only
	// them) at debug level, so the breakdown of the cold creates can be read from the gateway's output.
	caddyfile := fmt.Sprintf(`{
	admin {$SANDGATE_ADMIN}
	log launch {
		output stderr
		format json
		level DEBUG
		include sandboxes
	}
	sandboxes {
		namespace %[1]s
		start_timeout 5m
		driver kubernetes {
			mode %[10]s
			kubeconfig %[2]s
			namespace %[3]s
			cpu_request %[4]s
			image_pull_policy Never
		}
%[5]s%[6]s	}
}

http://127.0.0.1:%[7]d {
	bind 127.0.0.1
	sandbox_api {
		api_key %[8]s
		data_dir %[9]s
	}
}
`, testenv.Unique("sgkb"), k.kube.Kubeconfig, k.ns, k8sCPURequest, profile("cold", ""),
		profile("warm", "\t\t\twarm_pool 1\n\t\t\twarm_pool_max 1\n"), port, key, k.b.TempDir(), k8sMode())
	k.gw = testenv.StartGateway(k.b, caddyfile, testenv.GatewayOptions{Binary: testenv.KubeCaddyBinary(k.b)})
	k.api = client.New(fmt.Sprintf("http://127.0.0.1:%d", port), key)
}

// k8sMode is the driver mode the run measures: SANDGATE_K8S_MODE, default pods.
func k8sMode() string { return testenv.Getenv("SANDGATE_K8S_MODE", "pods") }

func (k *kbench) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), testenv.WaitLimit)
}

// createToReady is what a client sees: POST /v1/sandboxes, then GET every 20 ms until status ready.
func (k *kbench) createToReady(profile string) (time.Duration, string) {
	ctx, cancel := k.ctx()
	defer cancel()
	start := time.Now()
	sb, err := k.api.CreateSandbox(ctx, profile, 3600)
	if err != nil {
		k.b.Fatalf("create %s: %v", profile, err)
	}
	if _, err := k.api.WaitReady(ctx, sb.ID, 20*time.Millisecond); err != nil {
		k.b.Fatalf("waiting for %s to be ready: %v\n%s", sb.ID, err, k.gw.Logs())
	}
	return time.Since(start), sb.ID
}

func (k *kbench) deleteSandbox(id string) {
	ctx, cancel := k.ctx()
	defer cancel()
	if err := k.api.DeleteSandbox(ctx, id); err != nil {
		k.b.Fatalf("delete %s: %v", id, err)
	}
}

// kubectlRunToReady is the baseline: `kubectl run` of the same image with the sandbox's resources and pull policy,
// then `kubectl wait --for=condition=Ready`, both as processes (as a user or a script runs them). The Pod has no
// readiness probe, so Ready means its container started: the baseline does not wait for the agent to listen, the
// gateway does. The Pod is deleted (and waited for) outside the measured time.
func (k *kbench) kubectlRunToReady() time.Duration {
	ctx, cancel := k.ctx()
	defer cancel()
	name := testenv.Unique("run")
	overrides, err := json.Marshal(map[string]any{"spec": map[string]any{
		"automountServiceAccountToken": false,
		"containers":                   []any{k.baselineContainer(name)},
	}})
	if err != nil {
		k.b.Fatal(err)
	}
	start := time.Now()
	if _, err := k.kube.Run(ctx, "-n", k.ns, "run", name, "--image", k.image, "--image-pull-policy", "Never",
		"--restart", "Never", "--overrides", string(overrides)); err != nil {
		k.b.Fatal(err)
	}
	if _, err := k.kube.Run(ctx, "-n", k.ns, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=5m"); err != nil {
		k.b.Fatal(err)
	}
	d := time.Since(start)
	if _, err := k.kube.Run(ctx, "-n", k.ns, "delete", "pod", name, "--grace-period=1", "--wait=true"); err != nil {
		k.b.Fatal(err)
	}
	return d
}

// baselineContainer is the container of both kubectl baselines: the sandbox's image, pull policy, limits and
// requests, and the agent's token.
func (k *kbench) baselineContainer(name string) map[string]any {
	return map[string]any{
		"name": name, "image": k.image, "imagePullPolicy": "Never",
		"env": []map[string]string{{"name": "SANDGATE_AGENT_TOKEN", "value": "bench"}},
		"resources": map[string]any{
			"limits":   map[string]string{"cpu": k8sCPULimit, "memory": k8sMemory},
			"requests": map[string]string{"cpu": k8sCPURequest, "memory": k8sMemory},
		},
	}
}

// coldVsRun alternates a cold create through the gateway with the two kubectl baselines; ids are the measured
// sandboxes.
func (k *kbench) coldVsRun() (cold, base, withPVC []time.Duration, ids []string) {
	for i := range k8sColdRuns + 1 {
		r := k.kubectlRunToReady()
		d, id := k.createToReady("cold")
		k.deleteSandbox(id)
		p := k.kubectlPodWithClaimToReady()
		if i > 0 {
			base, cold, withPVC, ids = append(base, r), append(cold, d), append(withPVC, p), append(ids, id)
		}
	}
	return cold, base, withPVC, ids
}

// kubectlPodWithClaimToReady is the second cold baseline: what a sandbox's storage costs the cluster by itself. The
// same Pod as kubectlRunToReady, with a fresh PersistentVolumeClaim like the driver's workspace (ReadWriteOnce,
// 1Gi, the default class: provisioned by local-path-provisioner when the Pod is scheduled) mounted at /workspace,
// applied as one manifest, then `kubectl wait --for=condition=Ready`. No init container, no NetworkPolicy, no
// container record. Both are deleted (and waited for) outside the measured time.
func (k *kbench) kubectlPodWithClaimToReady() time.Duration {
	ctx, cancel := k.ctx()
	defer cancel()
	name := testenv.Unique("pvc")
	withWorkspace := k.baselineContainer("sandbox")
	withWorkspace["volumeMounts"] = []map[string]string{{"name": "workspace", "mountPath": "/workspace"}}
	manifest, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{
		map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"accessModes": []string{"ReadWriteOnce"},
				"resources": map[string]any{"requests": map[string]string{"storage": "1Gi"}}}},
		map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"restartPolicy": "Never", "automountServiceAccountToken": false,
				"volumes":    []any{map[string]any{"name": "workspace", "persistentVolumeClaim": map[string]string{"claimName": name}}},
				"containers": []any{withWorkspace},
			}},
	}})
	if err != nil {
		k.b.Fatal(err)
	}
	start := time.Now()
	if _, err := k.kube.RunInput(ctx, manifest, "-n", k.ns, "apply", "-f", "-"); err != nil {
		k.b.Fatal(err)
	}
	if _, err := k.kube.Run(ctx, "-n", k.ns, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=5m"); err != nil {
		k.b.Fatal(err)
	}
	d := time.Since(start)
	if _, err := k.kube.Run(ctx, "-n", k.ns, "delete", "pod/"+name, "pvc/"+name, "--grace-period=1", "--wait=true"); err != nil {
		k.b.Fatal(err)
	}
	return d
}

// launchSteps is the median of each launch step (sandboxes.LaunchStepsMessage) of the sandboxes in ids, read from
// the gateway's JSON log, in launch order.
func launchSteps(logs string, ids []string) string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	steps := &stepLog{steps: map[string][]float64{}}
	for line := range strings.SplitSeq(logs, "\n") {
		if !strings.Contains(line, sandboxes.LaunchStepsMessage) {
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != sandboxes.LaunchStepsMessage {
			continue
		}
		if id, _ := rec["sandbox"].(string); !want[id] {
			continue
		}
		for key, v := range rec {
			if name, ok := strings.CutSuffix(key, "_ms"); ok {
				if f, ok := v.(float64); ok {
					steps.steps[name] = append(steps.steps[name], f)
				}
			}
		}
	}
	if m := steps.medians(); m != "" {
		return m
	}
	return "none logged"
}

// poolStats reads the warm pool of profile from the admin endpoint (GET /sandbox-pools).
func (k *kbench) poolStats(profile string) (ready int, hits uint64) {
	resp, err := http.Get("http://" + k.gw.AdminAddr + "/sandbox-pools")
	if err != nil {
		k.b.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Pools []struct {
			Profile string `json:"profile"`
			Ready   int    `json:"ready"`
			Hits    uint64 `json:"hits"`
		} `json:"pools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		k.b.Fatalf("reading /sandbox-pools: %v", err)
	}
	for _, p := range body.Pools {
		if p.Profile == profile {
			return p.Ready, p.Hits
		}
	}
	return 0, 0
}

// warmVsRun claims from a filled pool of one (waiting, unmeasured, for the refill to be ready before each claim) and
// alternates it with the kubectl baseline. A claim that the pool did not serve (its hit count did not move) fails.
func (k *kbench) warmVsRun() (warm, base []time.Duration) {
	for i := range k8sWarmRuns + 1 {
		ctx, cancel := k.ctx()
		var hits uint64
		if err := testenv.Poll(ctx, func(context.Context) (bool, error) {
			var ready int
			ready, hits = k.poolStats("warm")
			return ready > 0, nil
		}); err != nil {
			cancel()
			k.b.Fatalf("the warm pool never filled: %v\n%s", err, k.gw.Logs())
		}
		cancel()
		d, id := k.createToReady("warm")
		if _, after := k.poolStats("warm"); after != hits+1 {
			k.b.Fatalf("create %d was not a warm claim (pool hits %d -> %d)", i, hits, after)
		}
		k.deleteSandbox(id)
		r := k.kubectlRunToReady()
		if i > 0 {
			warm, base = append(warm, d), append(base, r)
		}
	}
	return warm, base
}

// execs runs `true` in one ready sandbox, alternating: through the gateway's API (shell/exec, which the agent runs
// with bash -c), the same command at the agent directly (the gateway's last hop, so the difference is the gateway's
// share), `true` itself at the agent (no shell, as kubectl runs it), and with `kubectl exec` (API server -> kubelet
// -> containerd) on the same Pod.
func (k *kbench) execs() (viaAPI, viaAgentShell, viaAgent, viaKubectl, kubectlGet []time.Duration) {
	_, id := k.createToReady("cold")
	defer k.deleteSandbox(id)
	addr, token := k.gw.Agent(k.b, id)
	ctx, cancel := k.ctx()
	defer cancel()
	host, _, _ := strings.Cut(addr, ":")
	out, err := k.kube.Run(ctx, "-n", k.ns, "get", "pods", "--field-selector", "status.podIP="+host,
		"-o", "jsonpath={.items[*].metadata.name}")
	pod := strings.TrimSpace(string(out))
	if err != nil || pod == "" || strings.Contains(pod, " ") {
		k.b.Fatalf("finding the Pod at %s: %q %v", host, pod, err)
	}
	agent := agentapi.NewClient("http://"+addr, token, nil)
	for i := range k8sExecRuns + 1 {
		t0 := time.Now()
		if res, err := k.api.Shell(ctx, id, "true", 30); err != nil || !res.Success {
			k.b.Fatalf("shell/exec through the gateway: %+v %v", res, err)
		}
		api := time.Since(t0)
		t0 = time.Now()
		if res, err := agent.Exec(ctx, agentapi.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			k.b.Fatalf("exec at the agent: %+v %v", res, err)
		}
		direct := time.Since(t0)
		t0 = time.Now()
		if res, err := agent.Exec(ctx, agentapi.ExecRequest{Cmd: "true"}); err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			k.b.Fatalf("shell exec at the agent: %+v %v", res, err)
		}
		directShell := time.Since(t0)
		t0 = time.Now()
		if _, err := k.kube.Run(ctx, "-n", k.ns, "exec", pod, "-c", "sandbox", "--", "true"); err != nil {
			k.b.Fatal(err)
		}
		kc := time.Since(t0)
		// What any kubectl command costs before its own work: start, read the kubeconfig, one API round trip.
		t0 = time.Now()
		if _, err := k.kube.Run(ctx, "-n", k.ns, "get", "pod", pod, "-o", "name"); err != nil {
			k.b.Fatal(err)
		}
		get := time.Since(t0)
		if i > 0 {
			viaAPI, viaAgent, viaKubectl = append(viaAPI, api), append(viaAgent, direct), append(viaKubectl, kc)
			viaAgentShell, kubectlGet = append(viaAgentShell, directShell), append(kubectlGet, get)
		}
	}
	return viaAPI, viaAgentShell, viaAgent, viaKubectl, kubectlGet
}
