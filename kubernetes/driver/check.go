package driver

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// permission is one thing the driver does in its namespace. docs/kubernetes.md lists the same set as a Role.
type permission struct {
	group, resource string
	verbs           []string
}

// Permissions is every API permission the driver of mode pods needs in its namespace, and nothing more.
var Permissions = []permission{
	{"", "pods", []string{"get", "list", "watch", "create", "delete", "patch"}},
	{"", "configmaps", []string{"get", "list", "create", "delete"}},
	{"", "persistentvolumeclaims", []string{"get", "list", "create", "delete"}},
	{"networking.k8s.io", "networkpolicies", []string{"create", "delete"}},
}

// AgentSandboxPermissions is every API permission the driver of mode agent_sandbox needs in its namespace: its
// records are Sandboxes instead of ConfigMaps, and it still creates Pods of its own for workspace copies.
var AgentSandboxPermissions = []permission{
	{"", "pods", []string{"get", "list", "watch", "create", "delete", "patch"}},
	{"agents.x-k8s.io", "sandboxes", []string{"get", "list", "create", "delete", "patch"}},
	{"", "persistentvolumeclaims", []string{"get", "list", "create", "delete"}},
	{"networking.k8s.io", "networkpolicies", []string{"create", "delete"}},
}

// permissionsOf is the permission set of a mode.
func permissionsOf(mode string) []permission {
	if mode == ModeAgentSandbox {
		return AgentSandboxPermissions
	}
	return Permissions
}

// Check verifies the API answers, the namespace exists, and the gateway's identity may do everything the driver
// does there (SelfSubjectAccessReview): a missing permission refuses start rather than failing a create later.
func (d *Driver) Check(ctx context.Context) ([]string, error) {
	v, err := d.cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("the kubernetes API does not answer: %w", err)
	}
	if _, err := d.cs.CoreV1().Namespaces().Get(ctx, d.cfg.Namespace, metav1.GetOptions{}); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("kubernetes namespace %s does not exist (create it; the driver does not)", d.cfg.Namespace)
		case apierrors.IsForbidden(err):
			// A Role bound in the namespace cannot read the Namespace object itself; the reviews below still
			// say whether the driver can work there.
		default:
			return nil, fmt.Errorf("reading kubernetes namespace %s: %w", d.cfg.Namespace, err)
		}
	}
	if d.cfg.Mode == ModeAgentSandbox {
		if err := d.checkAgentSandboxCRDs(); err != nil {
			return nil, err
		}
	}
	var missing []string
	for _, p := range permissionsOf(d.cfg.Mode) {
		for _, verb := range p.verbs {
			ok, err := d.allowed(ctx, p.group, p.resource, verb)
			if err != nil {
				return nil, fmt.Errorf("asking the API what the gateway may do: %w", err)
			}
			if !ok {
				missing = append(missing, verb+" "+qualified(p.group, p.resource))
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the gateway's kubernetes identity may not %s in namespace %s (docs/kubernetes.md lists the Role)",
			strings.Join(missing, ", "), d.cfg.Namespace)
	}
	warnings := []string{fmt.Sprintf("kubernetes %s: sandbox isolation is a NetworkPolicy, enforced only by a network plugin that implements NetworkPolicy", v.GitVersion)}
	return warnings, nil
}

func qualified(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func (d *Driver) allowed(ctx context.Context, group, resource, verb string) (bool, error) {
	r, err := d.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: d.cfg.Namespace, Group: group, Resource: resource, Verb: verb,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
