package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// TestExpiryRetentionOption: expiry_retention reaches the Manager's config (0 there means its 24h default); a
// negative one is refused at provision's check.
func TestExpiryRetentionOption(t *testing.T) {
	d := caddyfile.NewTestDispenser("sandboxes {\n\texpiry_retention 2h\n}")
	v, err := parseSandboxesOption(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := new(App)
	if err := json.Unmarshal(v.(httpcaddyfile.App).Value, app); err != nil {
		t.Fatal(err)
	}
	if got := app.managerConfig().ExpiryRetention; got != 2*time.Hour {
		t.Fatalf("expiry_retention 2h gave %v", got)
	}
	d = caddyfile.NewTestDispenser("sandboxes {\n\texpiry_retention soon\n}")
	if _, err := parseSandboxesOption(d, nil); err == nil || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("a bad duration: %v", err)
	}
}
