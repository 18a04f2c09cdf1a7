package driver

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// TestCheck checks start is refused without the namespace or a permission, naming what is missing.
func TestCheck(t *testing.T) {
	cases := []struct {
		name      string
		namespace bool
		deny      string // resource the review denies; "" allows all
		wantErr   string
	}{
		{name: "ready", namespace: true},
		{name: "no namespace", wantErr: "does not exist"},
		{name: "no network policies", namespace: true, deny: "networkpolicies", wantErr: "create networkpolicies.networking.k8s.io"},
		{name: "no pod watch", namespace: true, deny: "pods", wantErr: "watch pods"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, cs := testDriver(t, Config{})
			if tc.namespace {
				if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sbx"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				ra := r.Spec.ResourceAttributes
				if ra.Namespace != "sbx" {
					t.Errorf("review outside the namespace: %+v", ra)
				}
				r.Status.Allowed = ra.Resource != tc.deny
				return true, r, nil
			})
			warnings, err := d.Check(t.Context())
			if tc.wantErr == "" {
				if err != nil || len(warnings) == 0 || !strings.Contains(warnings[0], "NetworkPolicy") {
					t.Fatalf("check: %v %v", warnings, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want an error naming %q, got %v", tc.wantErr, err)
			}
		})
	}
}
