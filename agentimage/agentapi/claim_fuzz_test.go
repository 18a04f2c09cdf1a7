package agentapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzClaimRequest: the waiting agent's parse of POST /v1/claim (whose values carry a tenant's create env). Whatever
// the body, a claim that decodes and validates gives an environment of KEY=VALUE entries without NUL bytes, in
// which every Set variable holds its value and no Unset one is left.
func FuzzClaimRequest(f *testing.F) {
	f.Add([]byte(`{"set":{"A":"b","FASTGPT_SESSION_ID":"s-1"},"unset":["SANDGATE_AWAIT_CLAIM"]}`), "A=old\x00B=kept\x00SANDGATE_AWAIT_CLAIM=1")
	f.Add([]byte(`{"set":{"=x":"y"}}`), "")
	f.Add([]byte(`{"set":{"A":"b\u0000c"}}`), "A=1")
	f.Add([]byte(`{"unset":[""]}`), "")
	f.Fuzz(func(t *testing.T, body []byte, environ string) {
		var c ClaimRequest
		if json.Unmarshal(body, &c) != nil || c.Validate() != nil {
			return
		}
		var env []string
		for _, kv := range strings.Split(environ, "\x00") {
			if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
				env = append(env, kv)
			}
		}
		out := ApplyClaim(env, c)
		got := map[string]string{}
		for _, kv := range out {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.ContainsRune(kv, 0) {
				t.Fatalf("entry %q", kv)
			}
			got[k] = v
		}
		for k, v := range c.Set {
			if got[k] != v {
				t.Fatalf("%s=%q after the claim, want %q", k, got[k], v)
			}
		}
		for _, k := range c.Unset {
			if _, set := c.Set[k]; !set {
				if _, ok := got[k]; ok {
					t.Fatalf("%s left after the claim unset it", k)
				}
			}
		}
	})
}
