package driver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// allowAll answers every access review with allowed, except the resources in deny.
func allowAll(cs *fake.Clientset, deny ...string) {
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed = true
		for _, d := range deny {
			if r.Spec.ResourceAttributes.Resource == d {
				r.Status.Allowed = false
			}
		}
		return true, r, nil
	})
}

// watchesOf counts the watches started on secrets (the records): the fake clientset loses events sent before a watch is
// registered, which happens a moment after an informer's first list (kubernetes issue 95372), so a test waits for
// its stores' watches before it writes.
func watchesOf(cs *fake.Clientset) func() int {
	var mu sync.Mutex
	n := 0
	cs.PrependWatchReactor("secrets", func(a k8stesting.Action) (bool, watch.Interface, error) {
		ns := a.GetNamespace()
		w, err := cs.Tracker().Watch(a.GetResource(), ns)
		mu.Lock()
		n++
		mu.Unlock()
		return true, w, err
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

func testStateStore(t *testing.T, cs *fake.Clientset, id string) *StateStore {
	t.Helper()
	s, err := NewStateStore(cs, StateConfig{Namespace: "sbx", Manager: "unit", Identity: id,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		sandboxes.NewBoltStore(t.TempDir()+"/local.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// follower runs Follow and collects what it hands over.
type follower struct {
	mu   sync.Mutex
	got  []sandboxes.RecordChange
	stop context.CancelFunc
	done chan struct{}
}

func follow(t *testing.T, s *StateStore) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		s.Follow(ctx, func(c sandboxes.RecordChange) {
			f.mu.Lock()
			f.got = append(f.got, c)
			f.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-f.done })
	return f
}

func (f *follower) changes() []sandboxes.RecordChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sandboxes.RecordChange(nil), f.got...)
}

func rec(id string, phase sandboxes.Phase) sandboxes.Record {
	return sandboxes.Record{ID: id, Profile: "base", Owner: "alice", Token: "t-" + id, Phase: phase, CreatedAt: time.Unix(1700000000, 0).UTC()}
}

func TestStateStoreSharesRecords(t *testing.T) {
	cs := fake.NewClientset()
	allowAll(cs)
	watches := watchesOf(cs)
	a, b := testStateStore(t, cs, "gw-a"), testStateStore(t, cs, "gw-b")
	if _, err := a.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, "both stores to watch", func() bool { return watches() == 2 })
	fa, fb := follow(t, a), follow(t, b)

	// A writes: B hears of it, A does not hear its own write.
	if err := a.Put(rec("sb-1", sandboxes.PhaseStarting)); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(rec("sb-1", sandboxes.PhaseRunning)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, "B to see A's running record", func() bool {
		c := fb.changes()
		return len(c) > 0 && c[len(c)-1].Record.Phase == sandboxes.PhaseRunning
	})
	cm, err := cs.CoreV1().Secrets("sbx").Get(context.Background(), a.recordName("sb-1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[labelState] != "sandbox" || cm.Labels[kubenames.LabelManagedBy] != kubenames.ManagedBy || cm.Annotations[annoWriter] != "gw-a" {
		t.Fatalf("record object: %+v", cm.ObjectMeta)
	}
	fresh, err := b.Fresh(context.Background())
	if err != nil || len(fresh) != 1 || fresh[0].Phase != sandboxes.PhaseRunning {
		t.Fatalf("fresh: %+v %v", fresh, err)
	}

	// B deletes: A hears of it, and A's late write does not bring it back.
	if err := b.Delete("sb-1"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, "A to see B's delete", func() bool {
		for _, c := range fa.changes() {
			if c.Deleted && c.ID == "sb-1" {
				return true
			}
		}
		return false
	})
	if err := a.Put(rec("sb-1", sandboxes.PhaseDied)); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("sbx").Get(context.Background(), a.recordName("sb-1"), metav1.GetOptions{}); err == nil {
		t.Fatal("a late write brought a deleted record back")
	}
	for _, c := range fa.changes() {
		if !c.Deleted {
			t.Fatalf("A heard its own write: %+v", c)
		}
	}

	// A record B has not heard of yet is still refused resurrection once it saw it anywhere.
	if err := a.Put(rec("sb-2", sandboxes.PhaseRunning)); err != nil {
		t.Fatal(err)
	}
	recs, err := b.Fresh(context.Background())
	if err != nil || len(recs) != 1 || recs[0].ID != "sb-2" {
		t.Fatalf("fresh after the second create: %+v %v", recs, err)
	}
}

func TestStateStoreLoadSeesEarlierRecords(t *testing.T) {
	cs := fake.NewClientset()
	allowAll(cs)
	a := testStateStore(t, cs, "gw-a")
	if _, err := a.Load(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sb-1", "sb-2"} {
		if err := a.Put(rec(id, sandboxes.PhaseRunning)); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted gateway (a new identity) loads them all, and a foreign Secret is no record.
	if _, err := cs.CoreV1().Secrets("sbx").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := testStateStore(t, cs, "gw-a2")
	recs, err := b.Load()
	if err != nil || len(recs) != 2 {
		t.Fatalf("load: %+v %v", recs, err)
	}
	// A hand-edited record that does not parse is an error naming it.
	cm, _ := cs.CoreV1().Secrets("sbx").Get(context.Background(), a.recordName("sb-1"), metav1.GetOptions{})
	cm.Data[recordKey] = []byte("{")
	if _, err := cs.CoreV1().Secrets("sbx").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Fresh(context.Background()); err == nil || !strings.Contains(err.Error(), a.recordName("sb-1")) {
		t.Fatalf("fresh of a broken record: %v", err)
	}
}

func TestStateStoreMeta(t *testing.T) {
	cs := fake.NewClientset()
	allowAll(cs)
	a, b := testStateStore(t, cs, "gw-a"), testStateStore(t, cs, "gw-b")
	cases := []struct {
		name string
		run  func() (string, error)
		want string
	}{
		{"first init sets", func() (string, error) { return a.InitMeta("instance", "aaa") }, "aaa"},
		{"second init keeps the first", func() (string, error) { return b.InitMeta("instance", "bbb") }, "aaa"},
		{"read through the other", func() (string, error) { return b.Meta("instance") }, "aaa"},
		{"set overwrites", func() (string, error) { return "ccc", a.SetMeta("instance", "ccc") }, "ccc"},
		{"read after set", func() (string, error) { return b.Meta("instance") }, "ccc"},
		{"absent is empty", func() (string, error) { return a.Meta("other") }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run()
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
	if _, err := a.InitMeta("bad key!", "x"); err == nil {
		t.Fatal("a key that is no ConfigMap key was taken")
	}
}

func TestStateStorePermissions(t *testing.T) {
	cs := fake.NewClientset()
	allowAll(cs, "leases")
	a := testStateStore(t, cs, "gw-a")
	if _, err := a.Load(); err == nil || !strings.Contains(err.Error(), "leases.coordination.k8s.io") {
		t.Fatalf("load without lease rights: %v", err)
	}
}

// TestStateStoreLeaseHandover: one of two gateways holds the GC Lease; when it stops following, the other takes it.
func TestStateStoreLeaseHandover(t *testing.T) {
	cs := fake.NewClientset()
	allowAll(cs)
	a, b := testStateStore(t, cs, "gw-a"), testStateStore(t, cs, "gw-b")
	fa := follow(t, a)
	testenv.WaitUntil(t, "A to lead", a.Leading)
	follow(t, b)
	lease, err := cs.CoordinationV1().Leases("sbx").Get(context.Background(), a.leaseName(), metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "gw-a" {
		t.Fatalf("lease: %+v %v", lease, err)
	}
	if b.Leading() {
		t.Fatal("two leaders")
	}
	fa.stop()
	<-fa.done
	if a.Leading() {
		t.Fatal("A still leads after it stopped")
	}
	testenv.WaitUntil(t, "B to lead", b.Leading)
}

// TestStateStoreKeepsTokensOutOfConfigMaps is the finding of issue 33: a record holds its sandbox's agent token in
// clear (every gateway of the fleet needs it to talk to the agent), and ConfigMaps are readable by the cluster's
// `view` role. No ConfigMap the store writes holds a token; the record is a Secret. A record an older version kept in
// a ConfigMap is moved into a Secret at start, and its ConfigMap deleted, without losing the record.
func TestStateStoreKeepsTokensOutOfConfigMaps(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	allowAll(cs)
	old := testStateStore(t, cs, "gw-old")
	legacy, _ := json.Marshal(rec("sb-legacy", sandboxes.PhaseRunning))
	if _, err := cs.CoreV1().ConfigMaps("sbx").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: old.recordName("sb-legacy"),
		Namespace: "sbx", Labels: old.labels("sandbox")}, Data: map[string]string{recordKey: string(legacy)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := testStateStore(t, cs, "gw-a")
	recs, err := a.Load()
	if err != nil || len(recs) != 1 || recs[0].ID != "sb-legacy" || recs[0].Token != "t-sb-legacy" {
		t.Fatalf("load after the move: %+v %v", recs, err)
	}
	if err := a.Put(rec("sb-1", sandboxes.PhaseRunning)); err != nil {
		t.Fatal(err)
	}
	if err := a.SetMeta("k", "v"); err != nil {
		t.Fatal(err)
	}
	cms, err := cs.CoreV1().ConfigMaps("sbx").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		for k, v := range cm.Data {
			if strings.Contains(v, "t-sb-") {
				t.Errorf("configmap %s key %s holds an agent token: %s", cm.Name, k, v)
			}
		}
	}
	for _, id := range []string{"sb-legacy", "sb-1"} {
		sec, err := cs.CoreV1().Secrets("sbx").Get(ctx, a.recordName(id), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
		if sec.Type != corev1.SecretTypeOpaque || !strings.Contains(string(sec.Data[recordKey]), "t-"+id) {
			t.Errorf("record %s's secret: %+v", id, sec)
		}
	}
	// A gateway that restarts reads the token back from the Secret.
	b := testStateStore(t, cs, "gw-b")
	recs, err = b.Load()
	if err != nil || len(recs) != 2 {
		t.Fatalf("load by another gateway: %+v %v", recs, err)
	}
	for _, r := range recs {
		if r.Token != "t-"+r.ID {
			t.Errorf("record %s came back with token %q", r.ID, r.Token)
		}
	}
}
