package agentapi

import (
	"fmt"
	"slices"
	"strings"
)

// A warm sandbox of a caller-chosen image (the gateway's per-image warm pool) is started before anyone asked for
// it, so it cannot hold the environment its create will bring. Its agent therefore starts in a waiting form: with
// EnvAwaitClaim set it serves only GET /health and POST /v1/claim, starts nothing else (no image entrypoint, no
// kernels, no services), and on the claim replaces its own process (execve) with a fresh agent under the
// environment the claim names. Everything the sandbox runs from then on starts as in a cold sandbox of that create:
// the image's entrypoint, its HOME seed and every process see the create's environment.

// EnvAwaitClaim makes the agent wait for POST /v1/claim before it starts ("1").
const EnvAwaitClaim = "SANDGATE_AWAIT_CLAIM"

// ClaimPath is the waiting agent's one route besides GET /health (token-checked).
const ClaimPath = "/v1/claim"

// MaxClaimBytes bounds a claim's body.
const MaxClaimBytes = 1 << 20

// ClaimRequest is the body of POST /v1/claim: the changes from the waiting agent's environment to the one a cold
// sandbox of the create would have started with.
type ClaimRequest struct {
	// Set adds or replaces variables.
	Set map[string]string `json:"set,omitempty"`
	// Unset removes variables (EnvAwaitClaim among them).
	Unset []string `json:"unset,omitempty"`
}

// Validate refuses names and values an environment cannot hold.
func (c ClaimRequest) Validate() error {
	for k, v := range c.Set {
		if err := envName(k); err != nil {
			return err
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("claim: the value of %q holds a NUL byte", k)
		}
	}
	for _, k := range c.Unset {
		if err := envName(k); err != nil {
			return err
		}
	}
	return nil
}

func envName(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("claim: %q is not an environment variable name", k)
	}
	return nil
}

// ApplyClaim is environ (KEY=VALUE entries) after c: Unset removed, Set added or replaced, in a stable order.
func ApplyClaim(environ []string, c ClaimRequest) []string {
	drop := make(map[string]bool, len(c.Unset)+len(c.Set))
	for _, k := range c.Unset {
		drop[k] = true
	}
	for k := range c.Set {
		drop[k] = true
	}
	out := make([]string, 0, len(environ)+len(c.Set))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(c.Set))
	for k := range c.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+c.Set[k])
	}
	return out
}
