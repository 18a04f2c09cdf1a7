package e2b

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzMetadataFilter: whatever a client puts in the metadata filter, the parse never panics, never names a
// reserved key, and what it accepts round-trips: the SDK's encoding of the parsed map parses back to it.
func FuzzMetadataFilter(f *testing.F) {
	for _, s := range []string{"run=x%2520y&k%2526=v%253D", "a=b", "", "=x", "a", "a=1&a=2", "%zz", "sandgate.e2b%2Ftemplate=base",
		"a=b&&c=d", "k%3D=v"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		md, err := ParseMetadataFilter(raw)
		if err != nil {
			return
		}
		if len(md) > maxFilterPairs {
			t.Fatalf("%q: %d pairs", raw, len(md))
		}
		pairs := []string{}
		for k, v := range md {
			if k == "" || strings.HasPrefix(k, reservedPrefix) {
				t.Fatalf("%q gave key %q", raw, k)
			}
			pairs = append(pairs, url.QueryEscape(k)+"="+url.QueryEscape(v))
		}
		again, err := ParseMetadataFilter(url.QueryEscape(strings.Join(pairs, "&")))
		if err != nil || len(again) != len(md) {
			t.Fatalf("%q -> %v does not round-trip: %v %v", raw, md, again, err)
		}
		for k, v := range md {
			if again[k] != v {
				t.Fatalf("%q -> %v does not round-trip: %v", raw, md, again)
			}
		}
	})
}

// FuzzStates: the state filter accepts only running and paused.
func FuzzStates(f *testing.F) {
	for _, s := range []string{"running,paused", "paused", "", "RUNNING", "killed", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		st, err := ParseStates([]string{raw})
		if err == nil && len(st) == 0 {
			t.Fatalf("%q: no statuses", raw)
		}
	})
}

// FuzzTarget: whatever Host and routing headers a client sends, a target is a port and an id with no '-' that is
// a valid sandbox id, named by the Host's first label under a configured domain or by the headers on the domain
// itself.
func FuzzTarget(f *testing.F) {
	for _, s := range [][3]string{{"49983-sbxabc.sandbox.localhost:8443", "", ""}, {"sandbox.localhost", "sbx1", "49999"},
		{"8080-sandbox-abc.sandbox.localhost", "", ""}, {"localhost:8443", "a-b", "1"}, {"[::1]:1", "x", "65536"},
		{"1-a.b.sandbox.localhost", "", ""}, {"0-a.sandbox.localhost", "", ""}, {"01-a.sandbox.localhost", "", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, host, id, port string) {
		h := http.Header{}
		h.Set(SandboxIDHeader, id)
		h.Set(SandboxPortHeader, port)
		tg, ok := ParseTarget(host, h, []string{"sandbox.localhost"})
		if !ok {
			return
		}
		if tg.Port < 1 || tg.Port > 65535 || tg.ID == "" || strings.ContainsAny(tg.ID, "-./") {
			t.Fatalf("%q %q %q -> %+v", host, id, port, tg)
		}
		lower := strings.ToLower(host)
		if !strings.Contains(lower, strings.ToLower(tg.ID)) && tg.ID != h.Get(SandboxIDHeader) {
			t.Fatalf("%q %q %q -> %+v names an id from nowhere", host, id, port, tg)
		}
	})
}

// FuzzSignature: no query is a signed file request unless it carries the signature of its own path, operation,
// user and expiry under the token.
func FuzzSignature(f *testing.F) {
	const token = "0123456789abcdef0123456789abcdef"
	good := "path=%2Fa&signature=" + url.QueryEscape(fileSignature("/a", "read", "", token, ""))
	for _, s := range []string{good, "path=/a&signature=v1_x", "", "signature=&path=", good + "&signature_expiration=1"} {
		f.Add("GET", s)
	}
	now := time.Unix(1_900_000_000, 0)
	f.Fuzz(func(t *testing.T, method, raw string) {
		if !SignedFileRequest(method, raw, token, now) {
			return
		}
		q, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatalf("%q accepted but does not parse", raw)
		}
		op := "read"
		if method == http.MethodPost {
			op = "write"
		}
		if q.Get("signature") != fileSignature(q.Get("path"), op, q.Get("username"), token, q.Get("signature_expiration")) {
			t.Fatalf("%s %q accepted with a signature of something else", method, raw)
		}
	})
}
