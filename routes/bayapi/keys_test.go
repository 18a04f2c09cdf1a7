package bayapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestLoadKeys: BAY_* settings win over the configured ones (the key and allow_anonymous), a generated key lands
// in credentials.json with the BAY_SERVER__* endpoint and is warned about, and a configured key is accepted.
func TestLoadKeys(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name      string
		env       BayEnv
		set       KeySettings
		accepts   string
		anonymous bool
		generated bool
	}{
		{"configured", BayEnv{}, KeySettings{APIKey: "sk-config", AllowAnonymous: true}, "sk-config", true, false},
		{"env over config", BayEnv{APIKey: "sk-env", AllowAnonymous: &no}, KeySettings{APIKey: "sk-config", AllowAnonymous: true},
			"sk-env", false, false},
		{"generated", BayEnv{Host: "10.1.2.3", Port: 9000, AllowAnonymous: &yes}, KeySettings{}, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st := sandboxes.NewBoltStore(filepath.Join(dir, "sandgate.db"))
			defer st.Close()
			tc.set.DataDir = dir
			tc.set.Keys = []service.KeyConfig{{Key: "sk-bob", Owner: "bob"}}
			var logs bytes.Buffer
			keys, anonymous, err := LoadKeys(context.Background(), st, tc.env, tc.set, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if anonymous != tc.anonymous {
				t.Errorf("anonymous %v, want %v", anonymous, tc.anonymous)
			}
			if p, ok := keys.Lookup("sk-bob"); !ok || p.Owner != "bob" {
				t.Errorf("the extra key: %+v %v", p, ok)
			}
			if tc.accepts != "" {
				if _, ok := keys.Lookup(tc.accepts); !ok {
					t.Errorf("%s refused", tc.accepts)
				}
			}
			if got := strings.Contains(logs.String(), "generated an API key"); got != tc.generated {
				t.Errorf("warned of a generated key: %v, want %v\n%s", got, tc.generated, logs.String())
			}
			if !tc.generated {
				return
			}
			b, err := os.ReadFile(filepath.Join(dir, service.CredentialsFile))
			if err != nil {
				t.Fatal(err)
			}
			var c service.Credentials
			if err := json.Unmarshal(b, &c); err != nil || c.Endpoint != "http://10.1.2.3:9000" {
				t.Fatalf("credentials.json %s: %v", b, err)
			}
			if _, ok := keys.Lookup(c.APIKey); !ok {
				t.Error("the generated key is refused")
			}
		})
	}
}
