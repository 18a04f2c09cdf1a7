package caddymodule_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/sandgate/sandgate/caddymodule"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestCaddyfileAdapt checks every testdata/*.caddyfiletest: a Caddyfile, a line of dashes, and the JSON it must
// adapt to. Set SANDGATE_UPDATE_GOLDEN=1 to rewrite the JSON halves from the current adapter.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			input, want := readGolden(t, f)
			if os.Getenv("SANDGATE_UPDATE_GOLDEN") != "" {
				updateGolden(t, f, input)
				return
			}
			if !caddytest.CompareAdapt(t, f, input, "caddyfile", strings.TrimSpace(want)) {
				t.Errorf("%s: adapted JSON differs (SANDGATE_UPDATE_GOLDEN=1 rewrites it)", f)
			}
		})
	}
}

// TestCaddyfileExampleAdapts keeps the Caddyfile that `make run` uses in the golden set: its golden file must hold
// exactly the example's text.
func TestCaddyfileExampleAdapts(t *testing.T) {
	example, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	input, _ := readGolden(t, "testdata/caddyfile_example.caddyfiletest")
	if strings.TrimSpace(input) != strings.TrimSpace(string(example)) {
		t.Fatal("testdata/caddyfile_example.caddyfiletest does not hold Caddyfile.example; copy it over and rerun with SANDGATE_UPDATE_GOLDEN=1")
	}
}

func readGolden(t *testing.T, path string) (input, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(b), "\n----------\n", 2)
	if len(parts) != 2 {
		t.Fatalf("%s: want a Caddyfile, a line of ten dashes, then JSON", path)
	}
	return parts[0] + "\n", parts[1]
}

func updateGolden(t *testing.T, path, input string) {
	t.Helper()
	out, err := adaptToJSON(input)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := os.WriteFile(path, []byte(input+"----------\n"+out+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
