package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/kubernetes/driver"
	"github.com/sandgate/sandgate/sandboxes"
)

// The cluster tests run against the shared test cluster (scripts/cluster.sh, docs/kubernetes.md): make test-k8s
// sets SANDGATE_K8S_KUBECONFIG; without it they skip, and under make test-k8s a cluster that does not answer fails.

// clusterImage is our base image as the cluster's containerd holds it (imported from docker save; never pulled).
func clusterImage() string { return testenv.Getenv("SANDGATE_K8S_IMAGE", testenv.KubeImage("base")) }

// clusterClient is the test cluster (skipped without it, failed when it does not answer: testenv.KubeCluster) and a
// client-go clientset on its kubeconfig.
func clusterClient(t *testing.T) (*testenv.Kube, k8s.Interface) {
	t.Helper()
	kube := testenv.KubeCluster(t)
	cs, err := driver.NewClientset(kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kube, cs
}

// cluster is a real Manager on the kubernetes driver, in a Kubernetes namespace of its own deleted afterwards.
type cluster struct {
	t     *testing.T
	cs    k8s.Interface
	ns    string // Kubernetes namespace
	label string // the Manager's label namespace
	store string
	cfg   driver.Config
	mgr   *sandboxes.Manager
}

func newCluster(t *testing.T, profiles ...sandboxes.Profile) *cluster {
	t.Helper()
	return newClusterWith(t, nil, profiles...)
}

// newClusterWith is newCluster with the driver's configuration adjusted by tune.
func newClusterWith(t *testing.T, tune func(*driver.Config), profiles ...sandboxes.Profile) *cluster {
	t.Helper()
	kube, cs := clusterClient(t)
	// The namespace is made and deleted by testenv: it waits for the default ServiceAccount (the API refuses Pods
	// until it exists) and, at the end, until the namespace is gone.
	c := &cluster{t: t, cs: cs, ns: kube.Namespace(t, "sgk"), label: testenv.Unique("sgk"),
		store: filepath.Join(t.TempDir(), "store.db")}
	c.cfg = driver.Config{Kubeconfig: kube.Kubeconfig, Namespace: c.ns, ImagePullPolicy: "Never"}
	if tune != nil {
		tune(&c.cfg)
	}
	for i := range profiles {
		if profiles[i].Image == "" {
			profiles[i].Image = clusterImage()
		}
	}
	c.start(sandboxes.Config{Profiles: profiles, StartTimeout: 3 * time.Minute})
	return c
}

func (c *cluster) start(cfg sandboxes.Config) {
	c.t.Helper()
	drv, err := driver.New(c.cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{c.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: c.label}, drv, sandboxes.NewBoltStore(c.store), logger)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := mgr.Apply(ctx, cfg); err != nil {
		c.t.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		c.t.Fatal(err)
	}
	c.mgr = mgr
	c.t.Cleanup(func() { mgr.Close() })
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (c *cluster) ready(id string) sandboxes.Target {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tg, err := c.mgr.EnsureRunning(ctx, id)
	if err != nil {
		c.t.Fatalf("ensure running %s: %v", id, err)
	}
	return tg
}

func (c *cluster) sh(tg sandboxes.Target, script string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := agentapi.NewClientFor(tg.Addr, tg.Token, c.mgr.AgentHTTPClient()).Exec(ctx, agentapi.ExecRequest{Argv: []string{"sh", "-c", script}})
	if err != nil {
		c.t.Fatalf("exec %q: %v", script, err)
	}
	out, _ := res.StdoutBytes()
	return string(out)
}

func (c *cluster) count(what string) int {
	c.t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{}
	var n int
	var err error
	switch what {
	case "pods":
		var l *corev1.PodList
		if l, err = c.cs.CoreV1().Pods(c.ns).List(ctx, opts); err == nil {
			n = len(l.Items)
		}
	case "records":
		var l *corev1.ConfigMapList
		if l, err = c.cs.CoreV1().ConfigMaps(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=sandgate"}); err == nil {
			n = len(l.Items)
		}
	case "claims":
		var l *corev1.PersistentVolumeClaimList
		if l, err = c.cs.CoreV1().PersistentVolumeClaims(c.ns).List(ctx, opts); err == nil {
			for _, pvc := range l.Items {
				if pvc.DeletionTimestamp == nil {
					n++
				}
			}
		}
	case "policies":
		if l, lerr := c.cs.NetworkingV1().NetworkPolicies(c.ns).List(ctx, opts); lerr == nil {
			n = len(l.Items)
		} else {
			err = lerr
		}
	}
	if err != nil {
		c.t.Fatalf("listing %s: %v", what, err)
	}
	return n
}

func smallProfile(id string) sandboxes.Profile {
	return sandboxes.Profile{ID: id,
		Resources:    sandboxes.Resources{CPUs: 0.5, Memory: "256m", Disk: "64m"},
		Capabilities: []string{sandboxes.CapShell, sandboxes.CapPython, sandboxes.CapFilesystem}}
}

// TestClusterLifecycle: a real Manager on a real cluster creates a sandbox of our base image; it gets ready, runs
// a command through the agent, keeps its workspace over a stop and restart, refuses pause with the typed error,
// and leaves no Pod, record, policy or claim after delete.
func TestClusterLifecycle(t *testing.T) {
	c := newCluster(t, smallProfile("small"))
	ctx := context.Background()
	sb, err := c.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	tg := c.ready(sb.ID)
	if out := c.sh(tg, "id -u; echo kept > /workspace/keep.txt; cat /workspace/keep.txt"); out != "65532\nkept\n" {
		t.Fatalf("exec answered %q", out)
	}
	if n := c.count("policies"); n != 1 {
		t.Fatalf("%d network policies for one sandbox", n)
	}

	_, err = c.mgr.Pause(ctx, sb.ID)
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeCapabilityAbsent {
		t.Fatalf("pause on kubernetes: want %s, got %v", sandboxes.CodeCapabilityAbsent, err)
	}

	if err := c.mgr.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if n := c.count("pods"); n != 0 {
		t.Fatalf("%d pods after stop", n)
	}
	if c.count("claims") != 1 || c.count("records") != 1 || c.count("policies") != 1 {
		t.Fatal("stop lost the workspace claim or the container record")
	}
	tg = c.ready(sb.ID)
	if out := c.sh(tg, "cat /workspace/keep.txt"); out != "kept\n" {
		t.Fatalf("workspace after restart: %q", out)
	}

	if err := c.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"pods", "records", "policies", "claims"} {
		if n := c.count(what); n != 0 {
			t.Errorf("%d %s left after delete", n, what)
		}
	}
}

// TestClusterOOM: a sandbox whose agent the kernel's OOM killer ends is reported dead with reason oom, from the
// Pod's status, and its next use rebuilds it on the same workspace.
func TestClusterOOM(t *testing.T) {
	kube, _ := clusterClient(t)
	// The CPU request equals the limit, so the Pod is Guaranteed: every process in it starts with the kubelet's
	// oom_score_adj of -997, and the one raised below is the kernel's clear first choice.
	c := newClusterWith(t, func(cfg *driver.Config) { cfg.CPURequest = "500m" }, smallProfile("small"))
	ctx := context.Background()
	events, unsubscribe := c.mgr.Subscribe(64)
	defer unsubscribe()
	sb, err := c.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	tg := c.ready(sb.ID)
	c.sh(tg, "echo before > /workspace/before.txt")
	// The agent (the container's main process) volunteers as the OOM killer's victim. Only the node can say so:
	// the agent is not dumpable, so nothing in the sandbox may write its /proc entries. A child inherits its
	// parent's score, so the memory hog starts first (and waits for a go), then the agent's score is raised, then
	// the hog outgrows the limit and the kernel kills the agent: what Kubernetes reports as OOMKilled.
	go func() {
		ectx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, _ = agentapi.NewClientFor(tg.Addr, tg.Token, c.mgr.AgentHTTPClient()).Exec(ectx, agentapi.ExecRequest{Argv: []string{"sh", "-c",
			`touch /workspace/hog-waits; while [ ! -e /workspace/hog-go ]; do sleep 0.1; done; python3 -c "b = bytearray(1024*1024*1024); print(len(b))"`}})
	}()
	wctx, cancel := context.WithTimeout(ctx, testenv.WaitLimit)
	defer cancel()
	if err := testenv.Poll(wctx, func(context.Context) (bool, error) {
		return c.sh(tg, "test -e /workspace/hog-waits && echo yes || true") == "yes\n", nil
	}); err != nil {
		t.Fatalf("the memory hog never started: %v", err)
	}
	agent := agentHostPID(ctx, t, kube, c)
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", agent), []byte("1000"), 0); err != nil {
		t.Fatalf("making the agent the OOM victim: %v", err)
	}
	c.sh(tg, "touch /workspace/hog-go")
	deadline := time.After(6 * time.Minute)
	var se *sandboxes.Error
	for {
		select {
		case ev := <-events:
			if ev.SandboxID != sb.ID || ev.Type != sandboxes.EventDied {
				continue
			}
			if ev.Reason != "oom" || ev.Death == nil {
				t.Fatalf("death reported as %+v", ev)
			}
			got, err := c.mgr.Get(ctx, sb.ID)
			if err != nil || got.Died == nil || got.Died.Reason != "oom" {
				t.Fatalf("sandbox after the OOM: %+v %v", got, err)
			}
			// The next use starts the rebuild (answering not ready, or ready if it was quick); it is ready on the
			// same workspace.
			ectx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err = c.mgr.EnsureRunning(ectx, sb.ID)
			cancel()
			if err != nil && (!errors.As(err, &se) || se.Code != sandboxes.CodeNotReady) {
				t.Fatalf("next use after the OOM: %v", err)
			}
			for err != nil {
				select {
				case ev := <-events:
					if ev.SandboxID == sb.ID && ev.Type == sandboxes.EventReady {
						err = nil
					}
				case <-deadline:
					t.Fatal("the rebuild did not become ready")
				}
			}
			if out := c.sh(c.ready(sb.ID), "cat /workspace/before.txt"); out != "before\n" {
				t.Fatalf("workspace after the rebuild: %q", out)
			}
			return
		case <-deadline:
			t.Fatal("no death event within 6 minutes of the OOM")
		}
	}
}

// agentHostPID is the node's PID of the main process (our agent) of the one running sandbox Pod of c, from the
// node's containerd.
func agentHostPID(ctx context.Context, t *testing.T, kube *testenv.Kube, c *cluster) int {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		for _, st := range pod.Status.ContainerStatuses {
			id, ok := strings.CutPrefix(st.ContainerID, "containerd://")
			if st.Name != "sandbox" || !ok || st.State.Running == nil {
				continue
			}
			out, err := kube.Containerd(ctx, "task", "ls")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
					pid, err := strconv.Atoi(f[1])
					if err != nil {
						t.Fatalf("containerd's task list: %q", line)
					}
					return pid
				}
			}
			t.Fatalf("containerd has no task for container %s", id)
		}
	}
	t.Fatalf("no running sandbox Pod in %s", c.ns)
	return 0
}

// TestClusterWorkspaceCopy: a stopped sandbox's workspace is copied into a snapshot claim by a copy Pod, and a
// sandbox made from the snapshot reads its file; a running sandbox cannot be frozen, so its snapshot is refused
// with the typed error.
func TestClusterWorkspaceCopy(t *testing.T) {
	c := newCluster(t, smallProfile("small"))
	ctx := context.Background()
	sb, err := c.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	c.sh(c.ready(sb.ID), "echo kept > /workspace/keep.txt")
	_, err = c.mgr.CreateSnapshot(ctx, sb.ID, sandboxes.SnapshotRequest{Name: "running"})
	var se *sandboxes.Error
	if !errors.As(err, &se) || se.Code != sandboxes.CodeCapabilityAbsent {
		t.Fatalf("snapshot of a running sandbox: want %s, got %v", sandboxes.CodeCapabilityAbsent, err)
	}
	if err := c.mgr.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// A stopped sandbox's workspace is copied into a snapshot claim by a copy Pod, and a sandbox made from the
	// snapshot reads the file.
	snap, err := c.mgr.CreateSnapshot(ctx, sb.ID, sandboxes.SnapshotRequest{Name: "kept"})
	if err != nil {
		t.Fatalf("snapshot of a stopped sandbox: %v", err)
	}
	copied, stats, err := c.mgr.CreateFromSnapshot(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester@example.com"}, snap.ID)
	if err != nil {
		t.Fatalf("create from snapshot: %v", err)
	}
	t.Logf("snapshot copies: %+v", stats)
	if out := c.sh(c.ready(copied.ID), "cat /workspace/keep.txt"); out != "kept\n" {
		t.Fatalf("workspace of the sandbox made from the snapshot: %q", out)
	}
	if err := c.mgr.Delete(ctx, copied.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.mgr.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}

}

// TestClusterAgentSandboxMode: in mode agent_sandbox a sandbox is an agent-sandbox Sandbox that the cluster's own
// controller runs: visible to kubectl, Ready while it runs, its Pod the controller's, Suspended (no Pod, the
// workspace kept) while stopped, and gone after delete.
func TestClusterAgentSandboxMode(t *testing.T) {
	c := newClusterWith(t, func(cfg *driver.Config) { cfg.Mode = driver.ModeAgentSandbox }, smallProfile("small"))
	kube := testenv.KubeCluster(t)
	ctx := context.Background()
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := kube.Run(ctx, append([]string{"-n", c.ns}, args...)...)
		if err != nil {
			t.Fatalf("kubectl %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sb, err := c.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	tg := c.ready(sb.ID)
	if out := c.sh(tg, "echo kept > /workspace/keep.txt; cat /workspace/keep.txt"); out != "kept\n" {
		t.Fatalf("exec answered %q", out)
	}
	names := strings.Fields(kubectl("get", "sandboxes.agents.x-k8s.io", "-o", "name"))
	if len(names) != 1 {
		t.Fatalf("want one Sandbox, kubectl lists %v", names)
	}
	name := names[0]
	kubectl("wait", "--for=condition=Ready", "--timeout=2m", name)
	pod := strings.TrimPrefix(name, "sandbox.agents.x-k8s.io/")
	if owner := kubectl("get", "pod", pod, "-o", "jsonpath={.metadata.ownerReferences[0].kind}"); owner != "Sandbox" {
		t.Fatalf("the Pod's owner is %q, not the Sandbox", owner)
	}

	if err := c.mgr.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if mode := kubectl("get", name, "-o", "jsonpath={.spec.operatingMode}"); mode != "Suspended" || c.count("pods") != 0 || c.count("claims") != 1 {
		t.Fatalf("stopped: operatingMode %q, %d pods, %d claims", mode, c.count("pods"), c.count("claims"))
	}
	tg = c.ready(sb.ID)
	if out := c.sh(tg, "cat /workspace/keep.txt"); out != "kept\n" {
		t.Fatalf("workspace after restart: %q", out)
	}

	if err := c.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	kubectl("wait", "--for=delete", "--timeout=2m", name)
	for _, what := range []string{"pods", "policies", "claims"} {
		if n := c.count(what); n != 0 {
			t.Errorf("%d %s left after delete", n, what)
		}
	}
}
