package driver

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
	"sigs.k8s.io/yaml"
)

// TestShippedRoleIsLeastPrivilege: the Role of deploy/kubernetes/rbac.yaml grants, verb by verb, exactly what the
// driver's Check and the state store's check ask for (Permissions and StatePermissions) and nothing more, so the
// shipped fleet neither fails at start nor holds a permission it never uses; and with the rules the component
// agent-sandbox/ adds, exactly what mode agent_sandbox asks for (AgentSandboxPermissions and StatePermissions).
// TestFleetOnKubernetes and TestFleetOnKubernetesAgentSandbox run a fleet under each on the test cluster.
func TestShippedRoleIsLeastPrivilege(t *testing.T) {
	role := shippedRole(t)
	t.Run(ModePods, func(t *testing.T) {
		checkLeastPrivilege(t, role.Rules, slices.Concat(Permissions, StatePermissions))
	})
	t.Run(ModeAgentSandbox, func(t *testing.T) {
		checkLeastPrivilege(t, append(role.Rules, componentRules(t, "agent-sandbox")...),
			slices.Concat(AgentSandboxPermissions, StatePermissions))
	})
}

// componentRules are the rules a component of deploy/kubernetes adds to the Role (JSON patches `add /rules/-`).
func componentRules(t *testing.T, component string) []rbacv1.PolicyRule {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", component, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Patches []struct {
			Target struct{ Kind, Name string } `json:"target"`
			Patch  string                      `json:"patch"`
		} `json:"patches"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", component, err)
	}
	var rules []rbacv1.PolicyRule
	for _, p := range k.Patches {
		if p.Target.Kind != "Role" {
			continue
		}
		var ops []struct {
			Op, Path string
			Value    rbacv1.PolicyRule
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatalf("%s: the Role patch: %v", component, err)
		}
		for _, op := range ops {
			if op.Op != "add" || op.Path != "/rules/-" {
				t.Fatalf("%s: a Role patch other than adding a rule: %s %s", component, op.Op, op.Path)
			}
			rules = append(rules, op.Value)
		}
	}
	if len(rules) == 0 {
		t.Fatalf("%s adds no rule to the Role", component)
	}
	return rules
}

func shippedRole(t *testing.T) *rbacv1.Role {
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
	return role
}

// checkLeastPrivilege checks rules grant exactly the permissions perms, verb by verb, with no wildcard.
func checkLeastPrivilege(t *testing.T, rules []rbacv1.PolicyRule, perms []permission) {
	grant := func(set map[string]bool, group, resource, verb string) { set[group+"/"+resource+" "+verb] = true }
	granted, needed := map[string]bool{}, map[string]bool{}
	for _, r := range rules {
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
	for _, p := range perms {
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
