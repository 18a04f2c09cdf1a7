package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestAgentHealthAndAuth runs the agent in a hardened container: /health answers without a token, everything else
// refuses a missing or wrong token with the typed envelope, and accepts the right one.
func TestAgentHealthAndAuth(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell"}})
	ctx := context.Background()

	resp, err := http.Get(sb.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h agentapi.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Status != "ok" {
		t.Fatalf("health: %v %+v", err, h)
	}
	resp.Body.Close()

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "not-the-token", http.StatusUnauthorized},
		{"right token", sb.Token, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, sb.URL+"/v1/info", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusUnauthorized {
				var env agentapi.Envelope
				if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error == nil || env.Error.Code != agentapi.CodeUnauthorized {
					t.Fatalf("want typed unauthorized error, got %v %+v", err, env.Error)
				}
				return
			}
			var info agentapi.Info
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
			if info.WorkspaceRoot != "/workspace" || len(info.Capabilities) != 1 || info.SandboxID != sb.Name {
				t.Fatalf("info: %+v", info)
			}
		})
	}
}
