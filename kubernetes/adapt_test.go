package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/sandgate/sandgate/kubernetes"
)

// TestCaddyfileAdapt checks every testdata/*.caddyfiletest of the kubernetes driver as caddymodule's test of the
// same name checks its own: a Caddyfile, a line of ten dashes, and the JSON it must adapt to.
// SANDGATE_UPDATE_GOLDEN=1 rewrites the JSON halves from the current adapter.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(b), "\n----------\n")
			if !ok {
				t.Fatalf("%s: want a Caddyfile, a line of ten dashes, then JSON", f)
			}
			input += "\n"
			if os.Getenv("SANDGATE_UPDATE_GOLDEN") != "" {
				out, err := adaptToJSON(input)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if err := os.WriteFile(f, []byte(input+"----------\n"+out+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !caddytest.CompareAdapt(t, f, input, "caddyfile", strings.TrimSpace(want)) {
				t.Errorf("%s: adapted JSON differs (SANDGATE_UPDATE_GOLDEN=1 rewrites it)", f)
			}
		})
	}
}

// adaptToJSON adapts a Caddyfile to indented JSON; a warning is an error.
func adaptToJSON(input string) (string, error) {
	raw, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return "", fmt.Errorf("adapting: %w", err)
	}
	if len(warnings) > 0 {
		return "", fmt.Errorf("adapter warnings: %v", warnings)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "\t"); err != nil {
		return "", err
	}
	return out.String(), nil
}
