package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestShippedRoleIsLeastPrivilege: the Role of deploy/kubernetes/rbac.yaml grants, verb by verb, exactly what the
// driver's Check and the state store's check ask for (Permissions and StatePermissions) and nothing more, so the
// shipped fleet neither fails at start nor holds a permission it never uses. TestFleetOnKubernetes runs a fleet
// under that Role on the test cluster.
func TestShippedRoleIsLeastPrivilege(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.Role
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var r rbacv1.Role
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding rbac.yaml: %v", err)
		}
		if r.Kind == "Role" {
			if role != nil {
				t.Fatal("rbac.yaml has more than one Role")
			}
			role = &r
		}
	}
	if role == nil {
		t.Fatal("rbac.yaml has no Role")
	}

	grant := func(set map[string]bool, group, resource, verb string) { set[group+"/"+resource+" "+verb] = true }
	granted, needed := map[string]bool{}, map[string]bool{}
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: resource names and URLs are not what the code checks", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("rule %+v: a wildcard", r)
					}
					grant(granted, g, res, v)
				}
			}
		}
	}
	for _, p := range slices.Concat(Permissions, StatePermissions) {
		for _, v := range p.verbs {
			grant(needed, p.group, p.resource, v)
		}
	}
	for k := range needed {
		if !granted[k] {
			t.Errorf("the shipped Role lacks %s, which the gateway checks for at start", k)
		}
	}
	for k := range granted {
		if !needed[k] {
			t.Errorf("the shipped Role grants %s, which the gateway never uses", k)
		}
	}
}
