package driver

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// What the Manager sees of a container record and its Pod: Docker's container states, from Pod status.

// mainStatus is the sandbox container's status in its Pod, nil before the kubelet reports one.
func mainStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// terminal reports a Pod whose sandbox container has ended (restartPolicy Never: it never runs again), or that
// failed as a whole (evicted, its node lost).
func terminal(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	c := mainStatus(pod)
	return c != nil && c.State.Terminated != nil
}

// stateOf is the container state of a record whose Pod is pod (nil: none, i.e. created or stopped).
func stateOf(rec *metav1.ObjectMeta, pod *corev1.Pod) sandboxes.ContainerState {
	st := sandboxes.ContainerState{
		ID:      rec.Name,
		Name:    rec.Annotations[kubenames.AnnoName],
		Labels:  kubenames.ExactLabels(rec.Annotations),
		Created: rec.CreationTimestamp.Time,
	}
	if st.Name == "" {
		st.Name = rec.Name
	}
	if pod == nil {
		return st
	}
	c := mainStatus(pod)
	switch {
	case c != nil && c.State.Terminated != nil:
		t := c.State.Terminated
		st.ExitCode = int(t.ExitCode)
		st.OOMKilled = t.Reason == "OOMKilled"
		st.FinishedAt = t.FinishedAt.Time
		if t.Reason != "" && t.Reason != "Completed" && t.Reason != "Error" && !st.OOMKilled {
			st.Error = strings.TrimSpace(t.Reason + " " + t.Message)
		}
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		// Failed without a container exit (evicted, node lost): no exit code to give.
		st.ExitCode = -1
		st.Error = strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
		if st.Error == "" {
			st.Error = "pod " + strings.ToLower(string(pod.Status.Phase))
		}
		if pod.Status.Reason == "OOMKilled" {
			st.OOMKilled = true
		}
	case c != nil && c.State.Running != nil:
		// A Pod being deleted runs until its container is killed: it is still running, as a stopping container is.
		st.Running = true
	}
	return st
}
