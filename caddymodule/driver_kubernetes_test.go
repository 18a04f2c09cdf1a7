package caddymodule_test

import (
	"strings"
	"testing"
)

// TestKubernetesDriverCaddyfileErrors checks every bad driver block is a Caddyfile error naming the problem.
func TestKubernetesDriverCaddyfileErrors(t *testing.T) {
	cases := map[string]string{
		"unknown option":      "nodes 3",
		"missing value":       "namespace",
		"extra value":         "namespace a b",
		"bad namespace":       "namespace Not_Valid",
		"bad quantity":        "workspace_size lots",
		"bad pull policy":     "image_pull_policy Sometimes",
		"bad cidr":            "gateway_cidr 10.0.0.0/99",
		"empty cidr":          "gateway_cidr",
		"bad label":           "gateway_label app !!",
		"bad workspace_chown": "workspace_chown maybe",
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
