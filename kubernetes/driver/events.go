package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// Events streams Docker's die, oom and destroy events, read from a watch of the Pods labelled key=value:
//
//	oom then die: the sandbox container ended OOMKilled
//	die:          it ended otherwise (its exit code), or the Pod failed as a whole (exit -1)
//	destroy:      the Pod was deleted while alive by someone else than this driver (kubectl delete --force, a
//	              node drain); the record stays, so the next Start makes a new Pod on the same workspace
//
// A Pod this driver deletes (Stop, Remove, a restart) is marked first and reports nothing, as the Manager expects
// no death from its own stop. The watch is reopened from where it ended while the API allows; when it does not
// (the history is gone), the error channel ends the stream and the Manager resubscribes and re-inspects.
func (d *Driver) Events(ctx context.Context, key, value string) (<-chan sandboxes.ContainerEvent, <-chan error) {
	out := make(chan sandboxes.ContainerEvent, 64)
	outErr := make(chan error, 1)
	match := map[string]string{key: value}
	go func() {
		defer close(out)
		err := d.followPods(ctx, match, out)
		if ctx.Err() == nil {
			outErr <- err
		}
	}()
	return out, outErr
}

// followPods lists the Pods (what is dead already is not news), then watches from there until ctx ends or the
// watch cannot be resumed.
func (d *Driver) followPods(ctx context.Context, match map[string]string, out chan<- sandboxes.ContainerEvent) error {
	pods := d.cs.CoreV1().Pods(d.cfg.Namespace)
	opts := metav1.ListOptions{LabelSelector: kubenames.Selector(match)}
	list, err := pods.List(ctx, opts)
	if err != nil {
		return fmt.Errorf("listing pods to watch: %w", err)
	}
	t := newPodTracker(match)
	for i := range list.Items {
		t.seed(&list.Items[i])
	}
	rv := list.ResourceVersion
	for {
		opts.ResourceVersion = rv
		opts.AllowWatchBookmarks = true
		w, err := pods.Watch(ctx, opts)
		if err != nil {
			return fmt.Errorf("watching pods: %w", err)
		}
		next, err := t.follow(ctx, w, out)
		w.Stop()
		if next != "" {
			rv = next
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errCacheBehind) || (err == nil && next == ""):
			// Nothing was lost: the same version is asked for again once the server has had a moment.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		case err != nil:
			return err
		}
	}
}

// errCacheBehind is a watch the API server refused because its watch cache has not reached the version asked
// for yet. Kubernetes asks etcd for progress notifications to keep the cache current; an etcd without them (3.4,
// as Debian ships it) leaves the cache of a quiet resource behind the cluster's latest version until the next
// change of that resource, which is exactly what a retry from the same version then delivers.
var errCacheBehind = errors.New("the API server's watch cache is behind")

// tooLargeVersion reports the API server's answer to a watch from a version its cache has not reached.
func tooLargeVersion(st *metav1.Status) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeResourceVersionTooLarge {
			return true
		}
	}
	return false
}

// podTracker turns Pod watch events into container events, each death reported once.
type podTracker struct {
	match    map[string]string
	reported map[types.UID]bool
}

func newPodTracker(match map[string]string) *podTracker {
	return &podTracker{match: match, reported: map[types.UID]bool{}}
}

// seed records a Pod that exists when the stream begins: a dead one's death is not reported again.
func (t *podTracker) seed(pod *corev1.Pod) {
	if terminal(pod) {
		t.reported[pod.UID] = true
	}
}

// follow reads one watch until it ends; it answers the resource version to resume from ("" when it saw no
// event), or an error when the watch cannot be resumed (errCacheBehind when it can, a moment later).
func (t *podTracker) follow(ctx context.Context, w watch.Interface, out chan<- sandboxes.ContainerEvent) (string, error) {
	rv := ""
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil
			}
			if ev.Type == watch.Error {
				if st, isStatus := ev.Object.(*metav1.Status); isStatus && tooLargeVersion(st) {
					return rv, errCacheBehind
				}
				return "", fmt.Errorf("pod watch: %w", apierrors.FromObject(ev.Object))
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			rv = pod.ResourceVersion
			for _, ce := range t.handle(ev.Type, pod) {
				select {
				case out <- ce:
				case <-ctx.Done():
					return rv, nil
				}
			}
		}
	}
}

// handle is what one watch event means for the Manager.
func (t *podTracker) handle(typ watch.EventType, pod *corev1.Pod) []sandboxes.ContainerEvent {
	labels := kubenames.ExactLabels(pod.Annotations)
	if typ == watch.Bookmark || !kubenames.Matches(labels, t.match) {
		return nil
	}
	ours := pod.Annotations[annoStopping] != ""
	switch typ {
	case watch.Added, watch.Modified:
		if !terminal(pod) || t.reported[pod.UID] {
			return nil
		}
		t.reported[pod.UID] = true
		if ours {
			return nil
		}
		return deathEvents(pod, labels)
	case watch.Deleted:
		reported := t.reported[pod.UID]
		delete(t.reported, pod.UID)
		switch {
		case reported || ours:
			return nil
		case terminal(pod):
			// It died and went in one step, as far as this watch saw.
			return deathEvents(pod, labels)
		}
		return []sandboxes.ContainerEvent{{ContainerID: pod.Name, Action: "destroy", Labels: labels, ExitCode: -1, At: time.Now()}}
	}
	return nil
}

// deathEvents report a terminal Pod: oom first when the kernel's OOM killer ended it, then die with the exit code.
func deathEvents(pod *corev1.Pod, labels map[string]string) []sandboxes.ContainerEvent {
	st := stateOf(&pod.ObjectMeta, pod)
	at := orNow(st.FinishedAt)
	var evs []sandboxes.ContainerEvent
	if st.OOMKilled {
		evs = append(evs, sandboxes.ContainerEvent{ContainerID: pod.Name, Action: "oom", Labels: labels, ExitCode: -1, At: at})
	}
	return append(evs, sandboxes.ContainerEvent{ContainerID: pod.Name, Action: "die", Labels: labels, ExitCode: st.ExitCode, At: at})
}
