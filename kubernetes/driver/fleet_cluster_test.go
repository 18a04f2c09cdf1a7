package driver_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/kubernetes/driver"
	"github.com/sandgate/sandgate/sandboxes"
)

// fleetMember is one gateway's Manager of a fleet: the kubernetes driver and the StateStore on one namespace.
type fleetMember struct {
	name  string
	mgr   *sandboxes.Manager
	store *driver.StateStore
}

func newFleetMember(t *testing.T, kubeconfig, ns, label, name string) *fleetMember {
	t.Helper()
	drv, err := driver.New(driver.Config{Kubeconfig: kubeconfig, Namespace: ns, ImagePullPolicy: "Never"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := driver.NewStateStore(drv.Client(), driver.StateConfig{Namespace: ns, Manager: label, Identity: name,
		LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 500 * time.Millisecond},
		sandboxes.NewBoltStore(filepath.Join(t.TempDir(), name+".db")))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("gateway", name)
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: label}, drv, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := smallProfile("small")
	p.Image = clusterImage()
	if err := mgr.Apply(ctx, sandboxes.Config{Profiles: []sandboxes.Profile{p}, StartTimeout: 3 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	return &fleetMember{name: name, mgr: mgr, store: st}
}

// TestClusterFleetTwoManagers: two gateways' Managers share one namespace of the real cluster through the
// Kubernetes API. A sandbox created through A is listed and executed through B and deleted through B, after which
// A no longer lists it; exactly one holds the GC Lease, and when it closes the other takes it.
func TestClusterFleetTwoManagers(t *testing.T) {
	kube, cs := clusterClient(t)
	ns := kube.Namespace(t, "sgf")
	label := testenv.Unique("sgf")
	a := newFleetMember(t, kube.Kubeconfig, ns, label, "gw-a")
	b := newFleetMember(t, kube.Kubeconfig, ns, label, "gw-b")
	if a.mgr.Instance() != b.mgr.Instance() {
		t.Fatalf("one fleet, two instances: %s %s", a.mgr.Instance(), b.mgr.Instance())
	}
	ctx := context.Background()

	sb, err := a.mgr.Create(ctx, sandboxes.CreateRequest{Profile: "small", Owner: "tester@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if _, err := a.mgr.EnsureRunning(rctx, sb.ID); err != nil {
		t.Fatalf("ready through A: %v", err)
	}
	testenv.WaitUntil(t, "B to list A's sandbox ready", func() bool {
		list, _, err := b.mgr.List(ctx, sandboxes.ListOptions{})
		return err == nil && len(list) == 1 && list[0].ID == sb.ID && list[0].Status == sandboxes.StatusReady
	})
	tg, err := b.mgr.EnsureRunning(rctx, sb.ID)
	if err != nil {
		t.Fatalf("target through B: %v", err)
	}
	res, err := agentapi.NewClientFor(tg.Addr, tg.Token, b.mgr.AgentHTTPClient()).Exec(rctx, agentapi.ExecRequest{Argv: []string{"sh", "-c", "echo via-b > /workspace/f; cat /workspace/f"}})
	if err != nil {
		t.Fatalf("exec through B: %v", err)
	}
	if out, _ := res.StdoutBytes(); string(out) != "via-b\n" {
		t.Fatalf("exec through B answered %q", out)
	}

	if err := b.mgr.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("delete through B: %v", err)
	}
	testenv.WaitUntil(t, "A to forget the sandbox B deleted", func() bool {
		list, _, err := a.mgr.List(ctx, sandboxes.ListOptions{})
		return err == nil && len(list) == 0 && !a.mgr.Exists(sb.ID)
	})
	recs, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "sandgate.dev/state=sandbox"})
	if err != nil || len(recs.Items) != 0 {
		t.Fatalf("sandbox records left after delete: %v %v", recs, err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Fatalf("pod %s left after delete", p.Name)
		}
	}

	// The GC Lease: one holder, and the other takes over when it closes.
	testenv.WaitUntil(t, "one GC leader", func() bool { return a.mgr.GCLeader() != b.mgr.GCLeader() })
	leader, other := a, b
	if b.mgr.GCLeader() {
		leader, other = b, a
	}
	if err := leader.mgr.Close(); err != nil {
		t.Fatalf("closing %s: %v", leader.name, err)
	}
	testenv.WaitUntil(t, other.name+" to take the GC Lease", other.mgr.GCLeader)
	lease, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(lease.Items) != 1 || lease.Items[0].Spec.HolderIdentity == nil || *lease.Items[0].Spec.HolderIdentity != other.name {
		t.Fatalf("lease after handover: %+v %v", lease, err)
	}
}
