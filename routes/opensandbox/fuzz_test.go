package opensandbox

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// FuzzProxyPath: whatever a tenant puts in a proxy path, an admitted rest never resolves outside the route.
func FuzzProxyPath(f *testing.F) {
	for _, s := range []string{"/sandboxes/a/proxy/44772/ping", "/v1/sandboxes/a.k/proxy/1/../x", "/sandboxes/a/proxy/44772/%2e%2e/v1",
		"/sandboxes/a/proxy/80/x%2f..%2fy", "/sandboxes/../proxy/1/", "/sandboxes/a/proxy/65535/%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		pa, ok := parseProxyPath(p)
		if !ok || checkRest(pa.Rest) != nil {
			return
		}
		u, err := url.PathUnescape(pa.Rest)
		if err != nil {
			t.Fatalf("admitted an unescapable rest %q", pa.Rest)
		}
		for _, seg := range strings.Split(u, "/") {
			if seg == ".." || seg == "." {
				t.Fatalf("admitted dot segment in %q", p)
			}
		}
	})
}

// FuzzCreateBody: no create body makes the translation panic, and an accepted one names a known profile and
// carries no reserved metadata from the tenant.
func FuzzCreateBody(f *testing.F) {
	f.Add(fastGPTBody)
	f.Add(`{"image":{"uri":"sandgate/sandbox:base"},"entrypoint":["a'b"],"timeout":60,"resourceLimits":{"cpu":"500m","memory":"1Gi"}}`)
	f.Add(`{"image":{"uri":"x"},"networkPolicy":{"defaultAction":"deny","egress":[{"action":"deny","target":"*.x"}]}}`)
	h := New(Config{Sandboxes: newFake("127.0.0.1:1")})
	f.Fuzz(func(t *testing.T, body string) {
		var req CreateRequest
		if err := jsonUnmarshal(body, &req); err != nil {
			return
		}
		creq, _, e := h.translateCreate(req, Principal{Owner: "o"})
		if e != nil {
			if e.Code == "" || e.Status == 0 {
				t.Fatalf("untyped refusal %+v", e)
			}
			return
		}
		if creq.Profile == "" || creq.Owner != "o" {
			t.Fatalf("accepted %+v", creq)
		}
		for k := range req.Metadata {
			if strings.HasPrefix(k, reservedPrefix) {
				t.Fatalf("reserved key %q accepted", k)
			}
		}
	})
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
