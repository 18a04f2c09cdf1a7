package k8senv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// pod is the part of a Pod's JSON these tests read.
type pod struct {
	Status struct {
		Phase      string `json:"phase"`
		PodIP      string `json:"podIP"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			Name  string `json:"name"`
			State struct {
				Waiting *struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"waiting"`
				Terminated *struct {
					Reason   string `json:"reason"`
					ExitCode int    `json:"exitCode"`
				} `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

func (p *pod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// stuck is why a Pod will never become Ready, or "": an image the node does not have (nothing can be pulled) or a
// container that cannot be made does not fix itself.
func (p *pod) stuck() string {
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName":
				return w.Reason + ": " + w.Message
			}
		}
	}
	return ""
}

func getPod(ctx context.Context, k *testenv.Kube, ns, name string) (*pod, error) {
	out, err := k.Run(ctx, "-n", ns, "get", "pod", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var p pod
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("decoding pod %s/%s: %w", ns, name, err)
	}
	return &p, nil
}

// waitPod polls the Pod until done says so, failing t at once when the Pod can never get there.
func waitPod(t *testing.T, ctx context.Context, k *testenv.Kube, ns, name string, done func(*pod) bool) *pod {
	t.Helper()
	var last *pod
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, k, ns, name)
		if err != nil {
			return false, err
		}
		last = p
		if why := p.stuck(); why != "" {
			t.Fatalf("pod %s/%s cannot start: %s", ns, name, why)
		}
		return done(p), nil
	})
	if err != nil {
		t.Fatalf("waiting for pod %s/%s: %v (last status: %+v)", ns, name, err, last)
	}
	return last
}

// agentPod runs our sandbox image with the agent as its command, as the drivers run it: non-root, no privilege,
// nothing pulled.
func agentPod(ns, name, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[2]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/part-of: sandgate-k8senv
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: agent
    image: %[3]s
    imagePullPolicy: Never
    env:
    - name: %[4]s
      value: %[5]q
    ports:
    - containerPort: %[6]d
    readinessProbe:
      httpGet:
        path: /health
        port: %[6]d
      periodSeconds: 1
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: ["ALL"]
    resources:
      limits:
        cpu: "1"
        memory: 512Mi
`, ns, name, testenv.KubeImage("base"), agentapi.EnvToken, token, agentapi.DefaultPort)
}

// memoryHogPod allocates and touches far more memory than its limit allows.
func memoryHogPod(ns, name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[2]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/part-of: sandgate-k8senv
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
  containers:
  - name: hog
    image: %[3]s
    imagePullPolicy: Never
    command: ["python3", "-c", "b = bytearray(b'x') * (1 << 30)"]
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: ["ALL"]
    resources:
      limits:
        memory: 64Mi
`, ns, name, testenv.KubeImage("base"))
}

// TestClusterRunsAgentPod is the cluster's smoke test: a Pod of our sandbox image with the agent as its command gets
// Ready and answers at its Pod IP from the host (where the gateway runs); a Pod over its memory limit is reported
// OOMKilled; deleting the namespace leaves nothing behind, in the API or on the node.
func TestClusterRunsAgentPod(t *testing.T) {
	k := testenv.KubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.WaitLimit)
	defer cancel()
	ns := k.Namespace(t, "k8senv")
	token := testenv.Unique("token")

	applied := time.Now()
	if err := k.Apply(ctx, agentPod(ns, "agent", token)); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ctx, k, ns, "agent", (*pod).ready)
	t.Logf("agent pod: create to Ready %v (apply, scheduling, sandbox, network, agent up, readiness probe)", time.Since(applied).Round(time.Millisecond))
	if p.Status.PodIP == "" {
		t.Fatal("a Ready pod has no IP")
	}
	podIP := p.Status.PodIP
	base := fmt.Sprintf("http://%s:%d", podIP, agentapi.DefaultPort)
	client := &http.Client{Timeout: 10 * time.Second}

	var health agentapi.Health
	if code := getJSON(t, ctx, client, base+"/health", "", &health); code != http.StatusOK || health.Status != "ok" {
		t.Fatalf("GET /health at the Pod IP: %d %+v", code, health)
	}
	if code := getJSON(t, ctx, client, base+"/v1/info", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/info without the token: %d, want 401", code)
	}
	var info agentapi.Info
	if code := getJSON(t, ctx, client, base+"/v1/info", token, &info); code != http.StatusOK || info.WorkspaceRoot != "/workspace" {
		t.Fatalf("GET /v1/info with the token: %d %+v", code, info)
	}

	if err := k.Apply(ctx, memoryHogPod(ns, "hog")); err != nil {
		t.Fatal(err)
	}
	// The kubelet may publish the container's end before the Pod's phase: wait for both.
	p = waitPod(t, ctx, k, ns, "hog", func(p *pod) bool {
		return p.Status.Phase == "Failed" && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if term := p.Status.ContainerStatuses[0].State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Fatalf("the memory hog ended %q with exit code %d, want OOMKilled and 137", term.Reason, term.ExitCode)
	}

	if err := k.DeleteNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, ctx, k, ns, podIP, base)
}

// assertNothingLeft checks, after the namespace is gone from the API, that the node let go of it too: no Pod of it
// anywhere, no container of it in containerd (the kubelet removes those of deleted Pods on its own schedule, so
// this waits), the agent's address no longer answers and its IP is back in the pool.
func assertNothingLeft(t *testing.T, ctx context.Context, k *testenv.Kube, ns, podIP, base string) {
	t.Helper()
	out, err := k.Run(ctx, "get", "pods", "--all-namespaces", "--field-selector", "metadata.namespace="+ns, "-o", "name")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("pods of the deleted namespace: %q %v", out, err)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	if err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
		resp, err := client.Do(req)
		if err != nil {
			return true, nil
		}
		resp.Body.Close()
		return false, fmt.Errorf("still answers: %s", resp.Status)
	}); err != nil {
		t.Fatalf("the deleted agent at %s: %v", base, err)
	}
	if k.State == "" {
		t.Log("the cluster's state directory is not on this machine: containerd and IP pool not checked")
		return
	}
	if err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		out, err := k.Containerd(ctx, "containers", "ls", "-q", fmt.Sprintf(`labels."io.kubernetes.pod.namespace"==%s`, ns))
		if err != nil {
			return false, err
		}
		if left := strings.Fields(string(out)); len(left) > 0 {
			return false, fmt.Errorf("containers left: %v", left)
		}
		return true, nil
	}); err != nil {
		t.Fatalf("containerd after the namespace's deletion: %v", err)
	}
	// host-local keeps one file per address it handed out.
	lease := filepath.Join(k.State, "cni", "ipam", "sandgate-k8s", podIP)
	if _, err := os.Stat(lease); !os.IsNotExist(err) {
		t.Fatalf("the pod's address %s is still leased (%s): %v", podIP, lease, err)
	}
}

// getJSON GETs url (with the agent token when given) and decodes a 200 answer into v; it returns the status.
func getJSON(t *testing.T, ctx context.Context, c *http.Client, url, token string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(agentapi.TokenHeader, token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: decoding %q: %v", url, body, err)
		}
	}
	return resp.StatusCode
}
