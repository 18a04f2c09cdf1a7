package caddymodule_test

import (
	"strings"
	"testing"
)

// TestKubernetesDriverNotBuiltIn: this module's tests link no Kubernetes module, as a single-host build does, and a
// Caddyfile asking for driver kubernetes gets a Caddyfile error naming the build that has it.
func TestKubernetesDriverNotBuiltIn(t *testing.T) {
	input := "{\n\tadmin off\n\tsandboxes {\n\t\tdriver kubernetes {\n\t\t\tnamespace sandgate\n\t\t}\n\t}\n}\n"
	_, err := adaptToJSON(input)
	if err == nil {
		t.Fatal("driver kubernetes accepted by a gateway built without the Kubernetes module")
	}
	for _, want := range []string{"Caddyfile:", "not built into this gateway", "--with github.com/sandgate/sandgate/kubernetes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
