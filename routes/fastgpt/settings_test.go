package fastgpt

import (
	"strings"
	"testing"
	"time"
)

// TestSettingsConfig: empty settings are the original's environment variables, set ones are expanded, a missing
// secret and an unknown serve are refused, and a timeout that does not parse takes its default (0 here).
func TestSettingsConfig(t *testing.T) {
	t.Setenv("AGENT_SANDBOX_PROXY_SECRET", " env-secret ")
	t.Setenv("FASTGPT_APP_REQUEST_TIMEOUT_SECS", "7")
	expand := func(s string) string { return strings.ReplaceAll(s, "{x}", "expanded") }
	c, err := Settings{AppURL: "http://{x}", Serve: "ws", AddressCacheTTL: "soon"}.Config(expand, time.ParseDuration, nil)
	if err != nil || c.Secret != "env-secret" || c.AppURL != "http://expanded" || c.Routes != RoutesWS ||
		c.RequestTimeout != 7*time.Second || c.AddressCacheTTL != 0 {
		t.Fatalf("%+v, %v", c, err)
	}
	if c, err := (Settings{Secret: "{x}"}).Config(expand, time.ParseDuration, nil); err != nil || c.Secret != "expanded" || c.Routes != RoutesAll {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, err := (Settings{Serve: "both"}).Config(expand, time.ParseDuration, nil); err == nil || !strings.Contains(err.Error(), "routes must be") {
		t.Fatalf("serve both: %v", err)
	}
	t.Setenv("AGENT_SANDBOX_PROXY_SECRET", "")
	if _, err := (Settings{}).Config(expand, time.ParseDuration, nil); err == nil || !strings.Contains(err.Error(), "no secret") {
		t.Fatalf("no secret: %v", err)
	}
}
