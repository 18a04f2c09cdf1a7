package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// kubelet plays the node in unit tests: every Pod created gets the status fate gives it, at once.
type kubelet struct {
	n    int
	fate func(*corev1.Pod)
}

func (k *kubelet) react(action k8stesting.Action) (bool, runtime.Object, error) {
	pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
	k.n++
	pod.UID = types.UID(pod.Name + "-" + string(rune('a'+k.n)))
	if k.fate != nil {
		k.fate(pod)
	}
	return false, nil, nil
}

func running(pod *corev1.Pod) {
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.5", ContainerStatuses: []corev1.ContainerStatus{
		{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
}

func exited(code int32, reason string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, FinishedAt: metav1.NewTime(time.Date(2026, 11, 24, 16, 0, 0, 0, time.UTC))}}}}}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestLifecycle walks a container through Docker's states on the fake API, in both modes: created, running,
// stopped (record kept, Pod gone), restarted, dead (exit read back), replaced, removed.
func TestLifecycle(t *testing.T) {
	for _, mode := range []string{ModePods, ModeAgentSandbox} {
		t.Run(mode, func(t *testing.T) { testLifecycle(t, mode) })
	}
}

func testLifecycle(t *testing.T, mode string) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{Mode: mode})
	k := &kubelet{fate: running}
	cs.PrependReactor("create", "pods", k.react)
	spec := testSpec(sandboxes.Profile{})

	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.Inspect(ctx, id)
	if err != nil || st.Running || st.Labels["sg.owner"] != "alice@example.com" || st.Name != spec.Name {
		t.Fatalf("created: %+v %v", st, err)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("sbx").Get(ctx, id, metav1.GetOptions{})
	if err != nil || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].Name != id {
		t.Fatalf("network policy: %+v %v", np, err)
	}

	addr, err := d.Start(ctx, id, spec)
	if err != nil || addr != "10.88.0.5:7777" {
		t.Fatalf("start: %q %v", addr, err)
	}
	if st, _ := d.Inspect(ctx, id); !st.Running {
		t.Fatalf("not running after start: %+v", st)
	}
	if list, err := d.List(ctx, map[string]string{"sg.owner": "alice@example.com"}); err != nil || len(list) != 1 || !list[0].Running {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, _ := d.List(ctx, map[string]string{"sg.owner": "bob"}); len(list) != 0 {
		t.Fatalf("list of another owner: %+v", list)
	}
	// Start of a running container leaves it.
	if _, err := d.Start(ctx, id, spec); err != nil || k.n != 1 {
		t.Fatalf("second start: %v, %d pods made", err, k.n)
	}

	if err := d.Stop(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("sbx").Get(ctx, id, metav1.GetOptions{}); err == nil {
		t.Fatal("pod still there after stop")
	}
	if st, err := d.Inspect(ctx, id); err != nil || st.Running || st.ExitCode != 0 {
		t.Fatalf("stopped: %+v %v", st, err)
	}
	if err := d.Stop(ctx, id, time.Second); err != nil {
		t.Fatalf("stop of a stopped container: %v", err)
	}
	if _, err := d.Start(ctx, id, spec); err != nil || k.n != 2 {
		t.Fatalf("restart: %v, %d pods made", err, k.n)
	}

	// It dies: the exit is read back, and the next Start replaces the dead Pod.
	pod, _ := cs.CoreV1().Pods("sbx").Get(ctx, id, metav1.GetOptions{})
	exited(137, "OOMKilled")(pod)
	if _, err := cs.CoreV1().Pods("sbx").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ = d.Inspect(ctx, id)
	if st.Running || st.ExitCode != 137 || !st.OOMKilled || st.FinishedAt.IsZero() {
		t.Fatalf("dead: %+v", st)
	}
	if _, err := d.Start(ctx, id, spec); err != nil || k.n != 3 {
		t.Fatalf("start after death: %v, %d pods made", err, k.n)
	}

	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(ctx, id); !errors.Is(err, sandboxes.ErrContainerNotFound) {
		t.Fatalf("inspect after remove: %v", err)
	}
	if _, err := d.Start(ctx, id, spec); !errors.Is(err, sandboxes.ErrContainerNotFound) {
		t.Fatalf("start after remove: %v", err)
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	for what, n := range map[string]int{"pods": podCount(t, d), "network policies": npCount(t, d)} {
		if n != 0 {
			t.Errorf("%d %s left", n, what)
		}
	}
}

func podCount(t *testing.T, d *Driver) int {
	l, err := d.cs.CoreV1().Pods(d.cfg.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

func npCount(t *testing.T, d *Driver) int {
	l, err := d.cs.NetworkingV1().NetworkPolicies(d.cfg.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestStartFailures checks Start's answers for a container that exits at once and one that cannot start.
func TestStartFailures(t *testing.T) {
	cases := []struct {
		name  string
		fate  func(*corev1.Pod)
		check func(*testing.T, error)
	}{
		{"exits at once", exited(3, "Error"), func(t *testing.T, err error) {
			var ex *sandboxes.ExitedError
			if !errors.As(err, &ex) || ex.ExitCode != 3 || ex.OOMKilled {
				t.Fatalf("want ExitedError 3, got %v", err)
			}
		}},
		{"oom at once", exited(137, "OOMKilled"), func(t *testing.T, err error) {
			var ex *sandboxes.ExitedError
			if !errors.As(err, &ex) || !ex.OOMKilled {
				t.Fatalf("want an OOM ExitedError, got %v", err)
			}
		}},
		{"image missing", func(pod *corev1.Pod) {
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrPodStart) {
				t.Fatalf("want ErrPodStart, got %v", err)
			}
		}},
		{"workspace owner fails", func(pod *corev1.Pod) {
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "workspace-owner",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrPodStart) {
				t.Fatalf("want ErrPodStart, got %v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			d, cs := testDriver(t, Config{})
			cs.PrependReactor("create", "pods", (&kubelet{fate: tc.fate}).react)
			spec := testSpec(sandboxes.Profile{})
			id, err := d.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Start(ctx, id, spec)
			tc.check(t, err)
		})
	}
}

// TestStartWaitsForThePod checks Start follows a Pod that becomes running after it was created, through the watch.
func TestStartWaitsForThePod(t *testing.T) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{})
	cs.PrependReactor("create", "pods", (&kubelet{}).react) // created Pending, with no status
	watching := make(chan struct{}, 4)
	cs.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace())
		watching <- struct{}{}
		return true, w, err
	})
	id, done := startInBackground(ctx, t, d)
	select {
	case <-watching:
	case r := <-done:
		t.Fatalf("Start returned before the Pod ran: %+v", r)
	}
	pod, err := cs.CoreV1().Pods("sbx").Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running(pod)
	if _, err := cs.CoreV1().Pods("sbx").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.addr != "10.88.0.5:7777" {
		t.Fatalf("start: %+v", r)
	}
}

func TestVolumes(t *testing.T) {
	ctx := ctxT(t)
	d, _ := testDriver(t, Config{})
	labels := map[string]string{"sg.managed": "true", "sg.workspace": "My Work"}
	for range 2 {
		if err := d.CreateVolume(ctx, "sg-My_Work", labels); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CreateVolume(ctx, "sg-other", map[string]string{"sg.managed": "true", "sg.workspace": "other"}); err != nil {
		t.Fatal(err)
	}
	vols, err := d.ListVolumes(ctx, map[string]string{"sg.workspace": "My Work"})
	if err != nil || len(vols) != 1 || vols[0].Name != "sg-My_Work" || vols[0].Labels["sg.workspace"] != "My Work" {
		t.Fatalf("list: %+v %v", vols, err)
	}
	if all, _ := d.ListVolumes(ctx, map[string]string{"sg.managed": "true"}); len(all) != 2 {
		t.Fatalf("list all: %+v", all)
	}
	for range 2 {
		if err := d.RemoveVolume(ctx, "sg-My_Work"); err != nil {
			t.Fatal(err)
		}
	}
	if vols, _ := d.ListVolumes(ctx, map[string]string{"sg.workspace": "My Work"}); len(vols) != 0 {
		t.Fatalf("after remove: %+v", vols)
	}
}

// TestNoPause: the cluster cannot freeze a Pod, so the driver offers no PauseDriver (the Manager then answers
// pause with its typed capability error).
func TestNoPause(t *testing.T) {
	d, _ := testDriver(t, Config{})
	if _, ok := any(d).(sandboxes.PauseDriver); ok {
		t.Fatal("the kubernetes driver claims it can pause")
	}
}

// TestStartAcrossWatchEnds checks a watch that shows the Pod still starting and then ends makes Start read the
// Pod again rather than answer early.
func TestStartAcrossWatchEnds(t *testing.T) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{})
	cs.PrependReactor("create", "pods", (&kubelet{}).react)
	watches := make(chan *watch.FakeWatcher, 4)
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		watches <- w
		return true, w, nil
	})
	id, done := startInBackground(ctx, t, d)
	w := <-watches
	pod, err := cs.CoreV1().Pods("sbx").Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pending := pod.DeepCopy()
	pending.Status.Phase = corev1.PodPending
	w.Modify(pending)
	running(pod)
	if _, err := cs.CoreV1().Pods("sbx").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if r := <-done; r.err != nil || r.addr != "10.88.0.5:7777" {
		t.Fatalf("start: %+v", r)
	}
}

// TestCreateReplacesStaleRecord: a record of the same name the Manager does not know of (its gateway died before
// recording the create) is replaced, not a conflict that fails the sandbox.
func TestCreateReplacesStaleRecord(t *testing.T) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{})
	cs.PrependReactor("create", "pods", (&kubelet{fate: running}).react)
	spec := testSpec(sandboxes.Profile{})
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	spec.Labels["sg.generation"] = "1"
	id2, err := d.Create(ctx, spec)
	if err != nil || id2 != id {
		t.Fatalf("second create: %q %v", id2, err)
	}
	st, err := d.Inspect(ctx, id)
	if err != nil || st.Running || st.Labels["sg.generation"] != "1" {
		t.Fatalf("after the replacing create: %+v %v", st, err)
	}
}

// startResult is what Start answered.
type startResult struct {
	addr string
	err  error
}

// startInBackground creates a container of a plain spec and starts it in a goroutine, so the test can move the
// Pod along while Start waits for it; the channel gets Start's answer.
func startInBackground(ctx context.Context, t *testing.T, d *Driver) (string, <-chan startResult) {
	t.Helper()
	spec := testSpec(sandboxes.Profile{})
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan startResult, 1)
	go func() {
		addr, err := d.Start(ctx, id, spec)
		done <- startResult{addr, err}
	}()
	return id, done
}

// TestStartConvergesWithAnotherGateway: two gateways of a fleet start one stopped sandbox at once. The second Pod
// create answers AlreadyExists; that Start waits for the other gateway's Pod and answers its address.
func TestStartConvergesWithAnotherGateway(t *testing.T) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{})
	spec := testSpec(sandboxes.Profile{})
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// The other gateway's create lands between this gateway's read (no Pod) and its own create.
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		running(pod)
		if err := cs.Tracker().Add(pod); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewAlreadyExists(corev1.Resource("pods"), pod.Name)
	})
	addr, err := d.Start(ctx, id, spec)
	if err != nil || addr != "10.88.0.5:7777" {
		t.Fatalf("start beside another gateway's: %q %v", addr, err)
	}
	if n := podCount(t, d); n != 1 {
		t.Fatalf("%d pods for one sandbox", n)
	}
}
