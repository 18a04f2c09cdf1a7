package kubernetes_test

import (
	"strings"
	"testing"
)

// TestKubernetesDriverCaddyfileErrors checks every bad driver block is a Caddyfile error naming the problem.
func TestKubernetesDriverCaddyfileErrors(t *testing.T) {
	cases := map[string]string{
		"unknown option":      "nodes 3",
		"bad mode":            "mode crd",
		"mode without value":  "mode",
		"missing value":       "namespace",
		"extra value":         "namespace a b",
		"bad namespace":       "namespace Not_Valid",
		"bad quantity":        "workspace_size lots",
		"bad pull policy":     "image_pull_policy Sometimes",
		"bad cidr":            "gateway_cidr 10.0.0.0/99",
		"empty cidr":          "gateway_cidr",
		"bad label":           "gateway_label app !!",
		"bad workspace_chown": "workspace_chown maybe",
		"bad state":           "state etcd",
		"state extra value":   "state kubernetes now",
		"state unknown opt":   "state kubernetes {\n\t\t\t\tleader always\n\t\t\t}",
		"state bad duration":  "state kubernetes {\n\t\t\t\tlease_duration soon\n\t\t\t}",
		"state lease order":   "state kubernetes {\n\t\t\t\tlease_duration 5s\n\t\t\t\trenew_deadline 10s\n\t\t\t}",
	}
	for name, line := range cases {
		t.Run(name, func(t *testing.T) {
			input := "{\n\tadmin off\n\tsandboxes {\n\t\tdriver kubernetes {\n\t\t\t" + line + "\n\t\t}\n\t}\n}\n"
			if _, err := adaptToJSON(input); err == nil {
				t.Fatalf("%q accepted", line)
			} else if !strings.Contains(err.Error(), "Caddyfile:") {
				t.Errorf("error does not point into the Caddyfile: %v", err)
			}
		})
	}
}

// TestStateNeedsKubernetesDriver: state kubernetes under the docker driver is a Caddyfile error that says where the
// option belongs.
func TestStateNeedsKubernetesDriver(t *testing.T) {
	input := "{\n\tadmin off\n\tsandboxes {\n\t\tdriver docker {\n\t\t\tstate kubernetes\n\t\t}\n\t}\n}\n"
	_, err := adaptToJSON(input)
	if err == nil || !strings.Contains(err.Error(), "option of the kubernetes driver") || !strings.Contains(err.Error(), "Caddyfile:") {
		t.Fatalf("state under the docker driver: %v", err)
	}
}
