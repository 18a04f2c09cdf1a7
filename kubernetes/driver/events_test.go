package driver

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

func eventPod(uid string, fate func(*corev1.Pod), stopping bool) *corev1.Pod {
	spec := testSpec(sandboxes.Profile{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sg-abc123", Namespace: "sbx", UID: types.UID(uid),
		Labels: podLabels(spec), Annotations: kubenames.Annotations(spec.Name, spec.Labels)}}
	if stopping {
		pod.Annotations[annoStopping] = "true"
	}
	if fate != nil {
		fate(pod)
	}
	return pod
}

// TestPodEvents checks the state mapping of Pod watch events onto Docker's die/oom/destroy, each death once, and
// nothing for the driver's own deletions.
func TestPodEvents(t *testing.T) {
	type step struct {
		typ  watch.EventType
		pod  *corev1.Pod
		want []string // actions, with the exit code for die as "die:N"
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"runs then ooms", []step{
			{watch.Added, eventPod("u1", nil, false), nil},
			{watch.Modified, eventPod("u1", running, false), nil},
			{watch.Modified, eventPod("u1", exited(137, "OOMKilled"), false), []string{"oom", "die:137"}},
			{watch.Modified, eventPod("u1", exited(137, "OOMKilled"), false), nil},
			{watch.Deleted, eventPod("u1", exited(137, "OOMKilled"), true), nil},
		}},
		{"exits with an error", []step{
			{watch.Modified, eventPod("u2", exited(2, "Error"), false), []string{"die:2"}},
		}},
		{"killed", []step{
			{watch.Modified, eventPod("u3", exited(137, "Error"), false), []string{"die:137"}},
		}},
		{"our stop", []step{
			{watch.Modified, eventPod("u4", running, true), nil},
			{watch.Modified, eventPod("u4", exited(143, "Error"), true), nil},
			{watch.Deleted, eventPod("u4", exited(143, "Error"), true), nil},
		}},
		{"force-deleted by someone else", []step{
			{watch.Modified, eventPod("u5", running, false), nil},
			{watch.Deleted, eventPod("u5", running, false), []string{"destroy"}},
		}},
		{"died and deleted in one step", []step{
			{watch.Deleted, eventPod("u6", exited(1, "Error"), false), []string{"die:1"}},
		}},
		{"evicted", []step{
			{watch.Modified, eventPod("u7", func(p *corev1.Pod) {
				p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}
			}, false), []string{"die:-1"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newPodTracker(map[string]string{"sg.managed": "true"})
			for i, s := range tc.steps {
				var got []string
				for _, ev := range tr.handle(s.typ, s.pod) {
					if ev.ContainerID != "sg-abc123" || ev.Labels["sg.owner"] != "alice@example.com" || ev.At.IsZero() {
						t.Errorf("step %d: event %+v", i, ev)
					}
					a := ev.Action
					if a == "die" {
						a += ":" + strconv.Itoa(ev.ExitCode)
					}
					got = append(got, a)
				}
				if !slices.Equal(got, s.want) {
					t.Errorf("step %d (%s): %v, want %v", i, s.typ, got, s.want)
				}
			}
		})
	}
	t.Run("other namespace's pods", func(t *testing.T) {
		tr := newPodTracker(map[string]string{"sg.managed": "other"})
		if evs := tr.handle(watch.Modified, eventPod("u8", exited(1, "Error"), false)); len(evs) != 0 {
			t.Fatalf("events for a pod the match excludes: %+v", evs)
		}
	})
	t.Run("dead before the stream began", func(t *testing.T) {
		tr := newPodTracker(map[string]string{"sg.managed": "true"})
		tr.seed(eventPod("u9", exited(1, "Error"), false))
		if evs := tr.handle(watch.Modified, eventPod("u9", exited(1, "Error"), false)); len(evs) != 0 {
			t.Fatalf("an old death reported again: %+v", evs)
		}
	})
}

// TestEventStream runs Events on a watch the test drives: a death arrives, and a watch error ends the stream
// through the error channel, as the Manager expects to resubscribe.
func TestEventStream(t *testing.T) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{})
	fw := watch.NewFake()
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) { return true, fw, nil })
	events, errs := d.Events(ctx, "sg.managed", "true")
	fw.Modify(eventPod("u1", exited(137, "OOMKilled"), false))
	want := []string{"oom", "die"}
	for _, w := range want {
		select {
		case ev := <-events:
			if ev.Action != w {
				t.Fatalf("event %s, want %s", ev.Action, w)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s event", w)
		}
	}
	fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"})
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("nil error ends the stream")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a watch error did not end the stream")
	}
}
