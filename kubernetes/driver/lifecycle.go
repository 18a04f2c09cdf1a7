package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// The Driver's lifecycle calls on the container record (a ConfigMap) and its Pod; see the package comment for
// how Docker's states map onto them. The container id the Manager keeps is the record's name.

// Create makes the container record and the sandbox's NetworkPolicy; no Pod runs until Start.
func (d *Driver) Create(ctx context.Context, spec sandboxes.ContainerSpec) (string, error) {
	pod, err := d.podFor(spec)
	if err != nil {
		return "", err
	}
	rec, err := d.recs.create(ctx, spec, pod)
	if apierrors.IsAlreadyExists(err) {
		// Names come from sandbox ids, so this is the same sandbox's record, one the Manager does not know of (a
		// gateway that died between the create and recording it): stale, and replaced.
		if rerr := d.Remove(ctx, kubenames.Object(spec.Name)); rerr != nil {
			return "", fmt.Errorf("replacing the stale container record of %s: %w", spec.Name, rerr)
		}
		rec, err = d.recs.create(ctx, spec, pod)
	}
	if err != nil {
		return "", fmt.Errorf("creating the container record of %s: %w", spec.Name, err)
	}
	np := d.networkPolicyFor(spec)
	np.OwnerReferences = []metav1.OwnerReference{rec.owner}
	_, err = d.cs.NetworkingV1().NetworkPolicies(d.cfg.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Left by an earlier container of the same name whose record went first: replace it, it may differ.
		_ = d.cs.NetworkingV1().NetworkPolicies(d.cfg.Namespace).Delete(ctx, np.Name, metav1.DeleteOptions{})
		_, err = d.cs.NetworkingV1().NetworkPolicies(d.cfg.Namespace).Create(ctx, np, metav1.CreateOptions{})
	}
	if err != nil {
		// A sandbox never runs without its policy.
		_ = d.Remove(context.WithoutCancel(ctx), rec.meta.Name)
		return "", fmt.Errorf("creating the network policy of %s: %w", spec.Name, err)
	}
	return rec.meta.Name, nil
}

// pod reads a record's Pod; nil when there is none.
func (d *Driver) pod(ctx context.Context, id string) (*corev1.Pod, error) {
	pod, err := d.cs.CoreV1().Pods(d.cfg.Namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading pod %s: %w", id, err)
	}
	return pod, nil
}

// Start runs the record's Pod (a live one is left as it is; a dead one is replaced) and waits for it to have an
// address and a running container. Readiness of the agent stays the Manager's (its probe connection).
func (d *Driver) Start(ctx context.Context, containerID string, spec sandboxes.ContainerSpec) (string, error) {
	rec, err := d.recs.get(ctx, containerID)
	if err != nil {
		return "", err
	}
	pod, err := d.pod(ctx, containerID)
	if err != nil {
		return "", err
	}
	if pod != nil && (pod.DeletionTimestamp != nil || terminal(pod)) {
		// A dead Pod (its exit already read by whoever wanted it) or one still going away from a Stop: the name
		// is free only once it is gone.
		if err := d.deletePod(ctx, pod, 0); err != nil {
			return "", err
		}
		pod = nil
	}
	if pod == nil {
		if pod, err = d.recs.run(ctx, rec); err != nil {
			return "", err
		}
	}
	pod, err = d.waitPod(ctx, pod, startedOrFailed)
	if err != nil {
		return "", fmt.Errorf("starting pod %s: %w", containerID, err)
	}
	if st := stateOf(&rec.meta, pod); !st.Running {
		return "", &sandboxes.ExitedError{ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, At: orNow(st.FinishedAt)}
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(spec.AgentPort)), nil
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// startFailure is a waiting reason that no amount of waiting cures.
var startFailure = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "RunContainerError": true, "ImageInspectError": true, "ErrImagePull": true,
	"ImagePullBackOff": true,
}

// ErrPodStart is returned (wrapped) when a Pod cannot start (its image is missing, its spec refused by the node).
var ErrPodStart = errors.New("the pod cannot start")

// startedOrFailed is Start's wait: the sandbox container runs and the Pod has an address, or it ended, or it is
// stuck for a reason that will not pass.
func startedOrFailed(pod *corev1.Pod) (bool, error) {
	if terminal(pod) {
		return true, nil
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && startFailure[w.Reason] {
			return false, fmt.Errorf("%w: container %s: %s: %s", ErrPodStart, cs.Name, w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil && cs.Name != containerName && t.ExitCode != 0 {
			return false, fmt.Errorf("%w: init container %s exited %d: %s %s", ErrPodStart, cs.Name, t.ExitCode, t.Reason, t.Message)
		}
	}
	if c := mainStatus(pod); c != nil && c.State.Running != nil && pod.Status.PodIP != "" {
		return true, nil
	}
	return false, nil
}

// waitPod watches one Pod until cond is done or fails, or ctx ends. A watch that ends is opened again from what
// a fresh read shows.
func (d *Driver) waitPod(ctx context.Context, pod *corev1.Pod, cond func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	pods := d.cs.CoreV1().Pods(d.cfg.Namespace)
	for {
		if done, err := cond(pod); done || err != nil {
			return pod, err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
			ResourceVersion: pod.ResourceVersion,
		})
		if err != nil {
			return pod, waitErr(ctx, pod, err)
		}
		end, next, err := followPod(ctx, w, pod, cond)
		w.Stop()
		switch {
		case err != nil:
			return next, err
		case end == podGone:
			return next, fmt.Errorf("%w: pod %s was deleted", sandboxes.ErrContainerNotFound, pod.Name)
		case end == podDone:
			return next, nil
		}
		// The watch ended without an answer (closed, or refused because the server's watch cache is behind the
		// Pod's version, events.go): read the Pod again and watch from there, after a moment.
		select {
		case <-ctx.Done():
			return pod, waitErr(ctx, pod, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		fresh, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && fresh.UID != pod.UID) {
			return pod, fmt.Errorf("%w: pod %s was deleted", sandboxes.ErrContainerNotFound, pod.Name)
		}
		if err != nil {
			return pod, waitErr(ctx, pod, err)
		}
		pod = fresh
	}
}

// How a Pod watch ended for followPod.
const (
	watchEnded = iota // the watch closed with no answer
	podDone           // cond accepted the Pod
	podGone           // the Pod was deleted
)

// followPod reads a Pod watch until cond accepts the Pod, the Pod is gone, or the watch ends; it answers the
// last Pod it saw.
func followPod(ctx context.Context, w watch.Interface, pod *corev1.Pod, cond func(*corev1.Pod) (bool, error)) (int, *corev1.Pod, error) {
	for {
		select {
		case <-ctx.Done():
			return watchEnded, pod, waitErr(ctx, pod, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return watchEnded, pod, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || p.Name != pod.Name || p.UID != pod.UID {
				if ev.Type == watch.Error {
					return watchEnded, pod, nil
				}
				continue
			}
			if ev.Type == watch.Deleted {
				return podGone, p, nil
			}
			if done, err := cond(p); done || err != nil {
				return podDone, p, err
			}
			pod = p
		}
	}
}

// waitErr says what a Pod was doing when a wait ended, so a timeout names the reason (unschedulable, pulling).
func waitErr(ctx context.Context, pod *corev1.Pod, err error) error {
	why := string(pod.Status.Phase)
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why += "; " + string(c.Type) + ": " + c.Message
		}
	}
	if c := mainStatus(pod); c != nil && c.State.Waiting != nil {
		why += "; waiting: " + c.State.Waiting.Reason
	}
	if ctx.Err() != nil {
		return fmt.Errorf("pod %s (%s): %w", pod.Name, why, ctx.Err())
	}
	return fmt.Errorf("pod %s (%s): %w", pod.Name, why, err)
}

// markStopping marks a Pod the driver is about to delete (annoStopping), so no watcher of any gateway takes its
// end for a death. It answers the marked Pod, or nil when the Pod is gone already.
func (d *Driver) markStopping(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	if pod.Annotations[annoStopping] != "" {
		return pod
	}
	patch := []byte(`{"metadata":{"annotations":{"` + annoStopping + `":"true"}}}`)
	p, err := d.cs.CoreV1().Pods(d.cfg.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		// Deleting it anyway is still right; a watcher may then report a death the Manager checks against its
		// own state.
		return pod
	}
	return p
}

// deletePod deletes a Pod on purpose and waits until it is gone, so its name is free and no late event about it
// reads as a death of its successor. It is marked first: every gateway's watcher then knows this end is no death.
func (d *Driver) deletePod(ctx context.Context, pod *corev1.Pod, graceSecs int64) error {
	pods := d.cs.CoreV1().Pods(d.cfg.Namespace)
	if pod = d.markStopping(ctx, pod); pod == nil {
		return nil
	}
	uid := pod.UID
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &graceSecs,
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or already a different Pod (someone else's Start)
	}
	if err != nil {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != uid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("waiting for pod %s to go: %w", pod.Name, err)
	}
	_, err = d.waitPod(ctx, cur, func(*corev1.Pod) (bool, error) { return false, nil })
	if errors.Is(err, sandboxes.ErrContainerNotFound) {
		return nil
	}
	return fmt.Errorf("waiting for pod %s to go: %w", pod.Name, err)
}

// Stop deletes the Pod within grace, keeping the record and the workspace: the next Start makes a new Pod. The
// Pod is marked before its record is suspended, so no watcher takes the end for a death.
func (d *Driver) Stop(ctx context.Context, containerID string, grace time.Duration) error {
	pod, err := d.pod(ctx, containerID)
	if err != nil {
		return err
	}
	if pod != nil {
		pod = d.markStopping(ctx, pod)
	}
	if err := d.recs.suspend(ctx, containerID); err != nil {
		return err
	}
	if pod == nil {
		return nil
	}
	return d.deletePod(ctx, pod, int64(grace.Seconds()))
}

// Remove deletes the record, its Pod (at once) and its NetworkPolicy; the workspace PVC stays. A missing
// container is not an error. It does not wait for the Pod to be gone: the next Start of that name does.
func (d *Driver) Remove(ctx context.Context, containerID string) error {
	var errs []error
	pod, err := d.pod(ctx, containerID)
	if err != nil {
		errs = append(errs, err)
	} else if pod != nil {
		pod = d.markStopping(ctx, pod)
	}
	// Suspended first, so the Pod deleted below is not made again before its record is gone.
	if err := d.recs.suspend(ctx, containerID); err != nil {
		errs = append(errs, err)
	}
	if pod != nil {
		zero := int64(0)
		if err := d.cs.CoreV1().Pods(d.cfg.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s: %w", containerID, err))
		}
	}
	if err := d.cs.NetworkingV1().NetworkPolicies(d.cfg.Namespace).Delete(ctx, containerID, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting network policy %s: %w", containerID, err))
	}
	if err := d.recs.delete(ctx, containerID); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Inspect reports a container's state from its record and Pod.
func (d *Driver) Inspect(ctx context.Context, containerID string) (sandboxes.ContainerState, error) {
	rec, err := d.recs.get(ctx, containerID)
	if err != nil {
		return sandboxes.ContainerState{}, err
	}
	pod, err := d.pod(ctx, containerID)
	if err != nil {
		return sandboxes.ContainerState{}, err
	}
	return stateOf(&rec.meta, pod), nil
}

// List returns the containers (records) carrying every label in match, with their Pods' state.
func (d *Driver) List(ctx context.Context, match map[string]string) ([]sandboxes.ContainerState, error) {
	selector := kubenames.Selector(match)
	recs, err := d.recs.list(ctx, selector)
	if err != nil {
		return nil, err
	}
	pods, err := d.cs.CoreV1().Pods(d.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	byName := make(map[string]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	out := make([]sandboxes.ContainerState, 0, len(recs))
	for _, rec := range recs {
		if !kubenames.Matches(kubenames.ExactLabels(rec.meta.Annotations), match) {
			continue
		}
		out = append(out, stateOf(&rec.meta, byName[rec.meta.Name]))
	}
	return out, nil
}

// CreateVolume creates a workspace's PVC if it does not exist.
func (d *Driver) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	_, err := d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace).Create(ctx, d.pvcFor(name, labels), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating workspace claim %s: %w", name, err)
	}
	return nil
}

// RemoveVolume deletes a workspace's PVC (the cluster frees it once no Pod uses it); a missing one is fine.
func (d *Driver) RemoveVolume(ctx context.Context, name string) error {
	err := d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace).Delete(ctx, kubenames.Object(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting workspace claim %s: %w", name, err)
	}
	return nil
}

// ListVolumes returns the workspaces' PVCs carrying every label in match, under the names the Manager gave. A
// claim already being deleted is left out, as Docker no longer lists a removed volume.
func (d *Driver) ListVolumes(ctx context.Context, match map[string]string) ([]sandboxes.VolumeInfo, error) {
	list, err := d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: kubenames.Selector(match)})
	if err != nil {
		return nil, fmt.Errorf("listing workspace claims: %w", err)
	}
	out := make([]sandboxes.VolumeInfo, 0, len(list.Items))
	for _, pvc := range list.Items {
		exact := kubenames.ExactLabels(pvc.Annotations)
		if pvc.DeletionTimestamp != nil || !kubenames.Matches(exact, match) {
			continue
		}
		name := pvc.Annotations[kubenames.AnnoName]
		if name == "" {
			name = pvc.Name
		}
		out = append(out, sandboxes.VolumeInfo{Name: name, Labels: exact, Created: pvc.CreationTimestamp.Time})
	}
	return out, nil
}
