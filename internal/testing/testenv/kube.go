package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The shared test cluster (scripts/cluster.sh, docs/kubernetes.md "Test cluster"). Only make test-k8s, or a
// developer who ran `scripts/cluster.sh up` and `eval "$(scripts/cluster.sh env)"`, sets EnvKubeconfig; everywhere
// else the cluster tests skip.
const (
	// EnvKubeconfig names the cluster's admin kubeconfig.
	EnvKubeconfig = "SANDGATE_K8S_KUBECONFIG"
	// KubeVersion is the Kubernetes release scripts/cluster.sh builds.
	KubeVersion = "v1.37.2"
	// KubeImageRepo is where scripts/cluster.sh puts our sandbox images in the cluster's containerd: nothing can be
	// pulled, so Pods name these with imagePullPolicy Never.
	KubeImageRepo = "docker.io/sandgate/sandbox"
)

// Kube is the test cluster as a test sees it: its admin kubeconfig, the kubectl built with it, and (on the machine
// running it) its state directory.
type Kube struct {
	Kubeconfig string
	Kubectl    string
	// State is scripts/cluster.sh's state directory (SANDGATE_K8S_STATE), or "" where it is not on this machine.
	State string
}

// KubeCluster skips t under -short or when EnvKubeconfig is unset, and fails it when the cluster it names does not
// answer: under make test-k8s a missing cluster is a failure, not a skip.
func KubeCluster(t testing.TB) *Kube {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster test: runs without -short")
	}
	kubeconfig := os.Getenv(EnvKubeconfig)
	if kubeconfig == "" {
		t.Skipf("cluster test: %s is unset (make test-k8s sets it; or scripts/cluster.sh up, then eval \"$(scripts/cluster.sh env)\")", EnvKubeconfig)
	}
	k := &Kube{Kubeconfig: kubeconfig, Kubectl: kubectlPath()}
	if st := Getenv("SANDGATE_K8S_STATE", "/var/lib/sandgate-k8s"); isDir(st) {
		k.State = st
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := k.Run(ctx, "get", "--raw", "/readyz"); err != nil {
		t.Fatalf("the cluster of %s does not answer: %v", kubeconfig, err)
	}
	return k
}

// KubeCaddyBinary builds the fleet binary (./cmd/caddy of the Kubernetes module, kubernetes/ in the repository: the
// gateway with the kubernetes driver) once per test process and returns its path, build/test-caddy-k8s. Pass it as
// GatewayOptions.Binary to run a gateway on the kubernetes driver.
func KubeCaddyBinary(t testing.TB) string {
	t.Helper()
	bin, err := kubeCaddyBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var kubeCaddyBinary = sync.OnceValues(func() (string, error) {
	return buildCaddy(filepath.Join(RepoRoot(), "kubernetes"), "test-caddy-k8s")
})

// kubectlPath prefers the kubectl scripts/cluster.sh built (Debian's kubernetes-client is far older than the
// cluster): SANDGATE_K8S_KUBECTL, then the build cache, then PATH.
func kubectlPath() string {
	if p := os.Getenv("SANDGATE_K8S_KUBECTL"); p != "" {
		return p
	}
	p := filepath.Join(Getenv("SANDGATE_K8S_CACHE", "/var/cache/sandgate/k8s"), "bin-"+KubeVersion, "kubectl")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "kubectl"
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// KubeImage is the cluster's name of one of our sandbox image targets ("base", "browser").
func KubeImage(target string) string { return KubeImageRepo + ":" + target }

// KubectlError is a kubectl run that failed, with what it printed on stderr.
type KubectlError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *KubectlError) Error() string {
	return fmt.Sprintf("kubectl %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *KubectlError) Unwrap() error { return e.Err }

// NotFound reports whether kubectl said the object does not exist.
func (e *KubectlError) NotFound() bool { return strings.Contains(e.Stderr, "NotFound") }

// Run runs kubectl against the cluster and returns what it printed on stdout.
func (k *Kube) Run(ctx context.Context, args ...string) ([]byte, error) {
	return k.RunInput(ctx, nil, args...)
}

// RunInput runs kubectl with stdin (for `apply -f -`).
func (k *Kube) RunInput(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.Kubectl, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &KubectlError{Args: args, Err: err, Stderr: stderr.String()}
	}
	return stdout.Bytes(), nil
}

// Apply applies a manifest.
func (k *Kube) Apply(ctx context.Context, manifest string) error {
	_, err := k.RunInput(ctx, []byte(manifest), "apply", "-f", "-")
	return err
}

// Namespace creates a namespace of a unique name for t, waits for its default ServiceAccount (the API refuses Pods
// until the controller-manager has made it), and registers a cleanup that deletes it and waits until it is gone.
// Tests sharing the cluster never touch each other's objects.
func (k *Kube) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := Unique(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	if _, err := k.Run(ctx, "create", "namespace", ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := k.DeleteNamespace(context.Background(), ns); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	if err := Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := k.Run(ctx, "-n", ns, "get", "serviceaccount", "default")
		var kerr *KubectlError
		if errors.As(err, &kerr) && kerr.NotFound() {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatalf("waiting for the default ServiceAccount of %s: %v", ns, err)
	}
	return ns
}

// DeleteNamespace deletes a namespace and waits, up to WaitLimit, until the API no longer has it (every object in
// it finalized). Deleting a namespace that is gone already is no error.
func (k *Kube) DeleteNamespace(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	if _, err := k.Run(ctx, "delete", "namespace", ns, "--ignore-not-found", "--wait=false"); err != nil {
		return err
	}
	return Poll(ctx, func(ctx context.Context) (bool, error) {
		_, err := k.Run(ctx, "get", "namespace", ns)
		var kerr *KubectlError
		if errors.As(err, &kerr) && kerr.NotFound() {
			return true, nil
		}
		return false, err
	})
}

// Poll calls cond every 200 ms until it reports done or ctx ends. An error does not end the wait (an API server
// under load fails a call now and then); the last one is reported if the wait runs out.
func Poll(ctx context.Context, cond func(context.Context) (bool, error)) error {
	for {
		done, err := cond(ctx)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
			}
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Containerd runs Debian's ctr against the cluster's own containerd in the CRI's namespace: how a test sees what the
// kubelet left on the node. It needs the cluster's state directory on this machine.
func (k *Kube) Containerd(ctx context.Context, args ...string) ([]byte, error) {
	if k.State == "" {
		return nil, errors.New("the cluster's state directory is not on this machine")
	}
	sock := filepath.Join(k.State, "containerd", "containerd.sock")
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// NodeCgroupV2 says whether the cluster's node (this machine, whose state directory the cluster uses) runs on the
// unified cgroup hierarchy. The kubelet makes a container one OOM group only there, so only there does an OOM kill
// of any process in a sandbox end its container, visibly, as OOMKilled.
func (k *Kube) NodeCgroupV2() (bool, error) {
	if k.State == "" {
		return false, errors.New("the cluster's node is not this machine")
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return false, fmt.Errorf("reading the node's cgroup mount: %w", err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}
