// This file runs sandboxes/drivertest (the conform branch) on this driver. It is behind the drivertest build tag
// only until that package is merged: the lead removes the constraint line at merge.

package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandgate/sandgate/internal/testenv"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/drivertest"
	"github.com/sandgate/sandgate/sandboxes/kubernetes"
)

// TestConformance runs the driver conformance suite on the test cluster: each subtest's Manager namespace is also
// the Kubernetes namespace its objects live in, made here and deleted after.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: runs without -short")
	}
	kubeconfig := os.Getenv(envKubeconfig)
	if kubeconfig == "" {
		t.Skipf("cluster test: %s is unset (make test-k8s sets it)", envKubeconfig)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	drivertest.Run(t, drivertest.Env{
		Image: clusterImage(),
		Namespace: func(t *testing.T) string {
			ns := testenv.Unique("sgc")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating namespace %s: %v", ns, err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting namespace %s: %v", ns, err)
				}
			})
			return ns
		},
		Driver: func(t *testing.T, ns string) sandboxes.Driver {
			drv, err := kubernetes.New(kubernetes.Config{Kubeconfig: kubeconfig, Namespace: ns, ImagePullPolicy: "Never"})
			if err != nil {
				t.Fatalf("kubernetes driver: %v", err)
			}
			return drv
		},
		// The engine's own kill: SIGKILL to the container's main process (our agent), from inside its Pod, as the
		// kubelet has no kill of its own.
		Kill: func(ctx context.Context, ns, containerID string) error {
			script := `for p in /proc/[0-9]*; do [ "$(readlink $p/exe)" = /usr/local/bin/sandgate-agent ] && kill -9 "${p#/proc/}"; done; true`
			out, err := exec.CommandContext(ctx, kubectl(), "--kubeconfig", kubeconfig, "-n", ns, "exec", containerID, "-c", "sandbox",
				"--", "sh", "-c", script).CombinedOutput()
			if err != nil {
				return fmt.Errorf("kubectl exec: %v: %s", err, out)
			}
			return nil
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
	})
}

// kubectl is the one scripts/cluster.sh built (Debian's is far older than the cluster).
func kubectl() string {
	if p := os.Getenv("SANDGATE_K8S_KUBECTL"); p != "" {
		return p
	}
	p := filepath.Join(testenv.Getenv("SANDGATE_K8S_CACHE", "/var/cache/sandgate/k8s"), "bin-v1.37.2", "kubectl")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "kubectl"
}
