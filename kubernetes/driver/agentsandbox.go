package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/sandgate/sandgate/sandboxes"
)

// Mode agent_sandbox: each container record is a kubernetes-sigs/agent-sandbox Sandbox (agents.x-k8s.io/v1beta1),
// its podTemplate the very Pod mode pods would create, so a sandbox is the same hardened Pod either way. The
// Sandbox controller makes the Pod while the Sandbox's operatingMode is Running and deletes it while it is
// Suspended: Create makes the Sandbox Suspended (created, not started), Start sets Running and waits for the
// controller's Pod, Stop sets Suspended and deletes the Pod within the Manager's grace. The workspace stays this
// driver's PVC, mounted by the podTemplate, and the NetworkPolicy stays this driver's, owned by the Sandbox. Why
// SandboxTemplate, SandboxWarmPool and SandboxClaim are not used: docs/kubernetes.md.

// sandboxResource is the Sandbox resource of the API group the CRDs serve.
var sandboxResource = agentsv1beta1.GroupVersion.WithResource("sandboxes")

// sandboxRecords are the records of mode agent_sandbox.
type sandboxRecords struct {
	d   *Driver
	api dynamic.ResourceInterface
}

func newSandboxRecords(d *Driver, dyn dynamic.Interface) sandboxRecords {
	return sandboxRecords{d: d, api: dyn.Resource(sandboxResource).Namespace(d.cfg.Namespace)}
}

// sandboxFor is the Sandbox of a container whose Pod is pod: Suspended until Start, and without the headless
// Service the controller can make (the gateway reaches agents at their Pod IPs).
func sandboxFor(spec sandboxes.ContainerSpec, namespace string, pod *corev1.Pod) *agentsv1beta1.Sandbox {
	no := false
	sb := &agentsv1beta1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind},
		ObjectMeta: recordMeta(spec, namespace),
	}
	sb.Spec.PodTemplate = agentsv1beta1.PodTemplate{
		ObjectMeta: agentsv1beta1.PodMetadata{Labels: pod.Labels, Annotations: pod.Annotations},
		Spec:       pod.Spec,
	}
	sb.Spec.Service = &no
	sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	return sb
}

func sandboxRecord(u *unstructured.Unstructured) (*record, error) {
	var sb agentsv1beta1.Sandbox
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sb); err != nil {
		return nil, fmt.Errorf("reading sandbox %s: %w", u.GetName(), err)
	}
	return &record{meta: sb.ObjectMeta, owner: metav1.OwnerReference{
		APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind, Name: sb.Name, UID: sb.UID}}, nil
}

func (r sandboxRecords) create(ctx context.Context, spec sandboxes.ContainerSpec, pod *corev1.Pod) (*record, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sandboxFor(spec, r.d.cfg.Namespace, pod))
	if err != nil {
		return nil, fmt.Errorf("encoding the sandbox of %s: %w", spec.Name, err)
	}
	u, err := r.api.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return sandboxRecord(u)
}

func (r sandboxRecords) get(ctx context.Context, id string) (*record, error) {
	u, err := r.api.Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", sandboxes.ErrContainerNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading sandbox %s: %w", id, err)
	}
	return sandboxRecord(u)
}

func (r sandboxRecords) list(ctx context.Context, selector string) ([]*record, error) {
	l, err := r.api.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	out := make([]*record, 0, len(l.Items))
	for i := range l.Items {
		rec, err := sandboxRecord(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// setMode sets a Sandbox's operatingMode.
func (r sandboxRecords) setMode(ctx context.Context, id string, mode agentsv1beta1.SandboxOperatingMode) error {
	patch := []byte(`{"spec":{"operatingMode":"` + string(mode) + `"}}`)
	_, err := r.api.Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// run sets the Sandbox Running, then waits for the controller to make its Pod.
func (r sandboxRecords) run(ctx context.Context, rec *record) (*corev1.Pod, error) {
	if err := r.setMode(ctx, rec.meta.Name, agentsv1beta1.SandboxOperatingModeRunning); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s", sandboxes.ErrContainerNotFound, rec.meta.Name)
		}
		return nil, fmt.Errorf("running sandbox %s: %w", rec.meta.Name, err)
	}
	pod, err := r.d.waitPodMade(ctx, rec.meta.Name)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: the agent-sandbox controller made no Pod (is it running?): %w", rec.meta.Name, err)
	}
	return pod, nil
}

func (r sandboxRecords) suspend(ctx context.Context, id string) error {
	err := r.setMode(ctx, id, agentsv1beta1.SandboxOperatingModeSuspended)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("suspending sandbox %s: %w", id, err)
	}
	return nil
}

func (r sandboxRecords) delete(ctx context.Context, id string) error {
	bg := metav1.DeletePropagationBackground
	err := r.api.Delete(ctx, id, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting sandbox %s: %w", id, err)
	}
	return nil
}

// waitPodMade waits until a Pod of the name exists and is not being deleted (someone else makes it), and answers
// it. A watch that ends without one is opened again from a fresh list.
func (d *Driver) waitPodMade(ctx context.Context, name string) (*corev1.Pod, error) {
	pods := d.cs.CoreV1().Pods(d.cfg.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	for {
		l, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("looking for pod %s: %w", name, err)
		}
		for i := range l.Items {
			if l.Items[i].Name == name && l.Items[i].DeletionTimestamp == nil {
				return &l.Items[i], nil
			}
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion})
		if err == nil {
			pod := firstLivePod(ctx, w, name)
			w.Stop()
			if pod != nil {
				return pod, nil
			}
		}
		// The watch was refused (a server's watch cache behind the list, events.go) or ended: list again.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// firstLivePod reads a Pod watch until a Pod of the name not being deleted shows, or the watch ends (nil).
func firstLivePod(ctx context.Context, w watch.Interface, name string) *corev1.Pod {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && p.Name == name && ev.Type != watch.Deleted && p.DeletionTimestamp == nil {
				return p
			}
		}
	}
}

// ErrNoAgentSandboxCRDs is returned (wrapped) by Check in mode agent_sandbox when the cluster does not serve the
// Sandbox resource.
var ErrNoAgentSandboxCRDs = errors.New("the agent-sandbox CRDs are not installed")

// checkAgentSandboxCRDs asks the API whether it serves agents.x-k8s.io/v1beta1 sandboxes.
func (d *Driver) checkAgentSandboxCRDs() error {
	gv := agentsv1beta1.GroupVersion.String()
	list, err := d.cs.Discovery().ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the cluster serves no %s (install kubernetes-sigs/agent-sandbox and its controller, or use mode pods)", ErrNoAgentSandboxCRDs, gv)
	}
	if err != nil {
		return fmt.Errorf("asking the API for %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == sandboxResource.Resource {
			return nil
		}
	}
	return fmt.Errorf("%w: %s serves no %s", ErrNoAgentSandboxCRDs, gv, sandboxResource.Resource)
}
