package bayapi_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sandgate/sandgate/client"
	"github.com/sandgate/sandgate/sandboxes"
)

// TestUpgradeImportsOldAPIStore starts a real gateway on a data dir an earlier version left behind: its bayapi.db
// (written by that version's code, sandboxes/testdata) holds a generated key, history and cargos. The first start
// imports it into the Manager's store and sets the file aside; the stored key keeps working (no new key is made),
// the cargos are there, and a restart reads the one store only.
func TestUpgradeImportsOldAPIStore(t *testing.T) {
	dataDir := t.TempDir()
	old, err := os.ReadFile("../../sandboxes/testdata/bayapi-v1.db")
	if err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(dataDir, sandboxes.LegacyAPIStoreFile)
	if err := os.WriteFile(legacy, old, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDirLine := regexp.MustCompile(`data_dir \S+`)
	g := startGateway(t, "", nil, true, func(s string) string {
		return dataDirLine.ReplaceAllLiteralString(s, "data_dir "+dataDir)
	})
	if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("bayapi.db is still in place after the first start: %v", err)
	}
	if _, err := os.Stat(legacy + ".migrated"); err != nil {
		t.Fatalf("bayapi.db was not set aside: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(g.url, "sk-legacy-generated")
	check := func(stage string) {
		t.Helper()
		var cargo struct {
			Managed     bool `json:"managed"`
			SizeLimitMB int  `json:"size_limit_mb"`
		}
		if err := c.Do(ctx, "GET", "/v1/cargos/ws-0123456789ab", nil, &cargo); err != nil || cargo.SizeLimitMB != 256 || cargo.Managed {
			t.Fatalf("%s: the imported cargo: %+v %v", stage, cargo, err)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "credentials.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a key was generated although the imported store has one: %v", stage, err)
		}
		if err := client.New(g.url, "sk-legacy-revoked").Do(ctx, "GET", "/v1/cargos", nil, nil); err == nil {
			t.Errorf("%s: a revoked key of the old store was accepted", stage)
		}
	}
	check("after the import")
	g.Stop()
	g.Restart(g.caddyfile)
	check("after a restart")
	if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bayapi.db came back: %v", err)
	}
	if err := c.Do(ctx, "DELETE", "/v1/cargos/ws-0123456789ab", nil, nil); err != nil {
		t.Fatalf("deleting the imported cargo: %v", err)
	}
	var gone *client.Error
	if err := c.Do(ctx, "GET", "/v1/cargos/ws-0123456789ab", nil, nil); !errors.As(err, &gone) || gone.Status != 404 {
		t.Errorf("the deleted cargo: %v", err)
	}
}
