package driver

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// A container record stands for a container while no Pod runs (the package comment has the states). Its kind is
// the driver's mode: a ConfigMap holding the Pod as JSON, whose Pod the driver creates (mode pods, here), or an
// agent-sandbox Sandbox whose podTemplate is that Pod, whose Pod the Sandbox controller creates and deletes as its
// operatingMode says (mode agent_sandbox, agentsandbox.go). The Pod's name is the record's either way.
type records interface {
	// create makes the record of a container whose Pod is pod; an existing record of the name is the API's
	// AlreadyExists error, unwrapped.
	create(ctx context.Context, spec sandboxes.ContainerSpec, pod *corev1.Pod) (*record, error)
	// get reads a record; ErrContainerNotFound when there is none.
	get(ctx context.Context, id string) (*record, error)
	// list reads the records matching a label selector.
	list(ctx context.Context, selector string) ([]*record, error)
	// run asks for the record's Pod, when none is there or the one there is going, and answers it once it exists.
	run(ctx context.Context, rec *record) (*corev1.Pod, error)
	// suspend keeps the record's Pod from being made again once it is deleted. A missing record is no error.
	suspend(ctx context.Context, id string) error
	// delete deletes the record and, through the cluster's garbage collector, what it owns. A missing record is
	// no error.
	delete(ctx context.Context, id string) error
}

// record is a container record as the driver reads it, whatever its kind.
type record struct {
	meta metav1.ObjectMeta
	// owner makes an object the record's, deleted with it.
	owner metav1.OwnerReference
	// pod is the Pod to run, as JSON (ConfigMap records only).
	pod string
}

// configMapRecords are the records of mode pods.
type configMapRecords struct{ d *Driver }

func configMapRecord(cm *corev1.ConfigMap) *record {
	return &record{meta: cm.ObjectMeta, pod: cm.Data[podKey],
		owner: metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}
}

func (r configMapRecords) create(ctx context.Context, spec sandboxes.ContainerSpec, pod *corev1.Pod) (*record, error) {
	podJSON, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod of %s: %w", spec.Name, err)
	}
	cm, err := r.d.cs.CoreV1().ConfigMaps(r.d.cfg.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: recordMeta(spec, r.d.cfg.Namespace),
		Data:       map[string]string{podKey: string(podJSON)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return configMapRecord(cm), nil
}

// recordMeta is a record's name, labels and annotations, of either kind.
func recordMeta(spec sandboxes.ContainerSpec, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: kubenames.Object(spec.Name), Namespace: namespace,
		Labels: kubenames.Labels(spec.Labels), Annotations: kubenames.Annotations(spec.Name, spec.Labels),
	}
}

func (r configMapRecords) get(ctx context.Context, id string) (*record, error) {
	cm, err := r.d.cs.CoreV1().ConfigMaps(r.d.cfg.Namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", sandboxes.ErrContainerNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading container record %s: %w", id, err)
	}
	return configMapRecord(cm), nil
}

func (r configMapRecords) list(ctx context.Context, selector string) ([]*record, error) {
	cms, err := r.d.cs.CoreV1().ConfigMaps(r.d.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing container records: %w", err)
	}
	out := make([]*record, 0, len(cms.Items))
	for i := range cms.Items {
		// The fleet's sandbox state is kept in ConfigMaps of the same labels (statestore.go): not records.
		if _, ok := cms.Items[i].Data[podKey]; ok {
			out = append(out, configMapRecord(&cms.Items[i]))
		}
	}
	return out, nil
}

// run creates the Pod the record holds.
func (r configMapRecords) run(ctx context.Context, rec *record) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(rec.pod), pod); err != nil {
		return nil, fmt.Errorf("container record %s holds no usable pod: %w", rec.meta.Name, err)
	}
	pod.OwnerReferences = []metav1.OwnerReference{rec.owner}
	pod.Namespace = r.d.cfg.Namespace
	created, err := r.d.cs.CoreV1().Pods(r.d.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another gateway of a fleet started the same sandbox a moment ago: its Pod is this one's to wait for.
		if created, err = r.d.pod(ctx, pod.Name); err == nil && created == nil {
			err = fmt.Errorf("pod %s was there and is gone again", pod.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	return created, nil
}

// suspend has nothing to do: nobody but the driver makes a ConfigMap record's Pod.
func (configMapRecords) suspend(context.Context, string) error { return nil }

func (r configMapRecords) delete(ctx context.Context, id string) error {
	bg := metav1.DeletePropagationBackground
	err := r.d.cs.CoreV1().ConfigMaps(r.d.cfg.Namespace).Delete(ctx, id, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting container record %s: %w", id, err)
	}
	return nil
}
