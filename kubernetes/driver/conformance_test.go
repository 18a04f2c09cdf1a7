package driver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/kubernetes/driver"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/drivertest"
)

// TestConformance runs the driver conformance suite on the test cluster, in mode pods: each subtest's Manager
// namespace is also the Kubernetes namespace its objects live in, made here and deleted after.
func TestConformance(t *testing.T) { conformance(t, driver.ModePods) }

// TestConformanceAgentSandbox runs the same suite in mode agent_sandbox, against the agent-sandbox controller the
// test cluster runs: every sandbox is a Sandbox whose Pod that controller makes.
func TestConformanceAgentSandbox(t *testing.T) { conformance(t, driver.ModeAgentSandbox) }

func conformance(t *testing.T, mode string) {
	kube, cs := clusterClient(t)
	cgroupV2, err := kube.NodeCgroupV2()
	if err != nil {
		t.Fatal(err)
	}
	drivertest.Run(t, drivertest.Env{
		Image:     clusterImage(),
		Namespace: func(t *testing.T) string { return kube.Namespace(t, "sgc") },
		Driver: func(t *testing.T, ns string) sandboxes.Driver {
			drv, err := driver.New(driver.Config{Mode: mode, Kubeconfig: kube.Kubeconfig, Namespace: ns, ImagePullPolicy: "Never"})
			if err != nil {
				t.Fatalf("kubernetes driver: %v", err)
			}
			return drv
		},
		// The engine's own kill: SIGKILL to the container's main process (our agent) through the node's containerd,
		// as the kubelet has no kill of its own. Not from inside the Pod: the agent is not dumpable, so no process
		// beside it may signal it through /proc.
		Kill: func(ctx context.Context, ns, containerID string) error {
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, containerID, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading the Pod of %s: %w", containerID, err)
			}
			for _, st := range pod.Status.ContainerStatuses {
				if st.Name == "sandbox" && strings.HasPrefix(st.ContainerID, "containerd://") {
					_, err := kube.Containerd(ctx, "task", "kill", "--signal", "SIGKILL", strings.TrimPrefix(st.ContainerID, "containerd://"))
					return err
				}
			}
			return fmt.Errorf("the Pod of %s has no running sandbox container: %+v", containerID, pod.Status.ContainerStatuses)
		},
		Leftovers: func(ctx context.Context, ns string) ([]string, error) {
			var left []string
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, p := range pods.Items {
				left = append(left, fmt.Sprintf("pod %s (%s)", p.Name, p.Status.Phase))
			}
			cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=sandgate"})
			if err != nil {
				return nil, err
			}
			for _, c := range cms.Items {
				left = append(left, "container record "+c.Name)
			}
			sbs, err := kube.Run(ctx, "get", "sandboxes.agents.x-k8s.io", "-n", ns, "-o", "name")
			if err != nil {
				return nil, err
			}
			for _, name := range strings.Fields(string(sbs)) {
				left = append(left, "agent-sandbox "+name)
			}
			pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, c := range pvcs.Items {
				if c.DeletionTimestamp == nil {
					left = append(left, "claim "+c.Name)
				}
			}
			nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for _, n := range nps.Items {
				left = append(left, "network policy "+n.Name)
			}
			return left, nil
		},
		ChildOOMReported: cgroupV2,
	})
}
