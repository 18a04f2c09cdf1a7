package driver

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/sandgate/sandgate/sandboxes"
)

// fakeSandboxController plays the agent-sandbox controller on the fake API, as far as the driver relies on it: a
// Sandbox set Running gets a Pod of its name from its podTemplate, owned by it; one set Suspended or deleted
// loses its Pod. It answers the dynamic client the driver's records use.
func fakeSandboxController(t *testing.T, cs *fake.Clientset, namespace string) *dynamicfake.FakeDynamicClient {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sandboxResource: "SandboxList"})
	pods := cs.CoreV1().Pods(namespace)
	ctx := context.Background()
	dyn.PrependReactor("patch", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name, patch := a.(k8stesting.PatchAction).GetName(), string(a.(k8stesting.PatchAction).GetPatch())
		switch {
		case strings.Contains(patch, `"Running"`):
			// The tracker, not the client: the fake client is locked while its reactors run.
			obj, err := dyn.Tracker().Get(sandboxResource, namespace, name)
			if err != nil {
				return false, nil, nil
			}
			sb := sandboxOf(t, obj.(*unstructured.Unstructured))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Labels: sb.Spec.PodTemplate.ObjectMeta.Labels, Annotations: sb.Spec.PodTemplate.ObjectMeta.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind, Name: name, UID: sb.UID}}},
				Spec: sb.Spec.PodTemplate.Spec}
			if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("fake controller: creating pod %s: %v", name, err)
			}
		case strings.Contains(patch, `"Suspended"`):
			_ = pods.Delete(ctx, name, metav1.DeleteOptions{})
		}
		return false, nil, nil
	})
	dyn.PrependReactor("delete", "sandboxes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		_ = pods.Delete(ctx, a.(k8stesting.DeleteAction).GetName(), metav1.DeleteOptions{})
		return false, nil, nil
	})
	return dyn
}

func sandboxOf(t *testing.T, u *unstructured.Unstructured) *agentsv1beta1.Sandbox {
	t.Helper()
	var sb agentsv1beta1.Sandbox
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sb); err != nil {
		t.Fatal(err)
	}
	return &sb
}

// TestAgentSandboxRecord checks the Sandbox a create makes: the very Pod of mode pods as its podTemplate,
// Suspended until started, no Service, the Manager's identity, and the owner of the sandbox's NetworkPolicy; and
// that Start and Stop move its operatingMode.
func TestAgentSandboxRecord(t *testing.T) {
	ctx := ctxT(t)
	d, cs := testDriver(t, Config{Mode: ModeAgentSandbox})
	cs.PrependReactor("create", "pods", (&kubelet{fate: running}).react)
	api := d.recs.(sandboxRecords).api
	spec := testSpec(sandboxes.Profile{})

	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	u, err := api.Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sb := sandboxOf(t, u)
	want, _ := d.podFor(spec)
	tmpl := sb.Spec.PodTemplate
	switch {
	case sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended:
		t.Errorf("created %s, want Suspended", sb.Spec.OperatingMode)
	case sb.Spec.Service == nil || *sb.Spec.Service:
		t.Errorf("service %v, want false", sb.Spec.Service)
	case len(tmpl.Spec.Containers) != 1 || tmpl.Spec.Containers[0].Image != spec.Image ||
		*tmpl.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem != true || tmpl.Spec.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("pod template is not the sandbox pod: %+v", tmpl.Spec)
	case tmpl.ObjectMeta.Labels[labelContainer] != want.Labels[labelContainer] || sb.Labels["sg.owner"] == "":
		t.Errorf("labels: template %v, sandbox %v", tmpl.ObjectMeta.Labels, sb.Labels)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("sbx").Get(ctx, id, metav1.GetOptions{})
	if err != nil || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].Kind != "Sandbox" || np.OwnerReferences[0].UID != sb.UID {
		t.Fatalf("network policy owner: %+v %v", np.OwnerReferences, err)
	}

	mode := func() agentsv1beta1.SandboxOperatingMode {
		u, err := api.Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sandboxOf(t, u).Spec.OperatingMode
	}
	if _, err := d.Start(ctx, id, spec); err != nil || mode() != agentsv1beta1.SandboxOperatingModeRunning {
		t.Fatalf("start: %v, mode %s", err, mode())
	}
	pod, err := cs.CoreV1().Pods("sbx").Get(ctx, id, metav1.GetOptions{})
	if err != nil || pod.OwnerReferences[0].Kind != "Sandbox" {
		t.Fatalf("the controller's pod: %+v %v", pod, err)
	}
	if err := d.Stop(ctx, id, 0); err != nil || mode() != agentsv1beta1.SandboxOperatingModeSuspended {
		t.Fatalf("stop: %v, mode %s", err, mode())
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Get(ctx, id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("sandbox after remove: %v", err)
	}
}

// TestAgentSandboxNeedsCRDs checks Check refuses mode agent_sandbox on a cluster that does not serve the Sandbox
// resource, with the typed error, and accepts it once it does.
func TestAgentSandboxNeedsCRDs(t *testing.T) {
	d, cs := testDriver(t, Config{Mode: ModeAgentSandbox})
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sbx"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowAll(cs)
	if _, err := d.Check(t.Context()); !errors.Is(err, ErrNoAgentSandboxCRDs) {
		t.Fatalf("check without the CRDs: %v", err)
	}
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "agents.x-k8s.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "sandboxes", Namespaced: true, Kind: "Sandbox"}}}}
	if _, err := d.Check(t.Context()); err != nil {
		t.Fatalf("check with the CRDs: %v", err)
	}
}
