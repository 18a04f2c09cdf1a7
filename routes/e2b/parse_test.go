package e2b

import (
	"maps"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestMetadataFilter pins the triple decoding on what the SDK sent for {run:'x y','k&':'v='} (reference/e2b.md
// §2.4: metadata=run%3Dx%252520y%26k%252526%3Dv%25253D), after the query framework's own decode.
func TestMetadataFilter(t *testing.T) {
	q, err := url.ParseQuery("metadata=run%3Dx%252520y%26k%252526%3Dv%25253D")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		raw  string
		want map[string]string
		bad  bool
	}{
		{q.Get("metadata"), map[string]string{"run": "x y", "k&": "v="}, false},
		{"", nil, false},
		{"a%3Db", map[string]string{"a": "b"}, false},
		{"a", nil, true},
		{"%3Dx", nil, true},
		{"a%3D1%26a%3D2", nil, true},
		{"sandgate.e2b%2Ftemplate%3Dbase", nil, true},
		{"%zz", nil, true},
	} {
		got, err := ParseMetadataFilter(tc.raw)
		if (err != nil) != tc.bad || !maps.Equal(got, tc.want) {
			t.Errorf("%q -> %v %v, want %v (error %v)", tc.raw, got, err, tc.want, tc.bad)
		}
	}
}

// TestParseTarget: the Host names port and id; the routing headers count only on the domain itself (not on
// localhost or an address, the gateway's own origin); an id with '-' (every other dialect's) is never the E2B edge's.
func TestParseTarget(t *testing.T) {
	domains := []string{"sandbox.localhost"}
	h := http.Header{}
	h.Set(SandboxIDHeader, "sbxabc")
	h.Set(SandboxPortHeader, "49983")
	for _, tc := range []struct {
		host string
		hdr  http.Header
		want Target
		ok   bool
	}{
		{"49983-sbxabc.sandbox.localhost:8443", nil, Target{"sbxabc", 49983}, true},
		{"8000-SBXabc.Sandbox.Localhost", nil, Target{"sbxabc", 8000}, true},
		{"8080-sandbox-abc.sandbox.localhost", nil, Target{}, false},
		{"sbxabc.sandbox.localhost", nil, Target{}, false},
		{"0-sbxabc.sandbox.localhost", nil, Target{}, false},
		{"65536-sbxabc.sandbox.localhost", nil, Target{}, false},
		{"49983-a.b.sandbox.localhost", nil, Target{}, false},
		{"sandbox.localhost:8443", h, Target{"sbxabc", 49983}, true},
		{"localhost", h, Target{}, false},
		{"127.0.0.1:8443", h, Target{}, false},
		{"other.example", h, Target{}, false},
		{"49983-sbxabc.other.example", h, Target{}, false},
	} {
		got, ok := ParseTarget(tc.host, tc.hdr, domains)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q -> %+v %v, want %+v %v", tc.host, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFileSignature: the SDK's signature for a read of /etc/hostname, and what is refused.
func TestFileSignature(t *testing.T) {
	const token = "tok"
	now := time.Unix(1_800_000_000, 0)
	sig := fileSignature("/etc/hostname", "read", "", token, "")
	// sha256("/etc/hostname:read::tok"), base64 without padding, as the SDK computes it.
	q := url.Values{"path": {"/etc/hostname"}, "signature": {sig}}
	if !SignedFileRequest("GET", q.Encode(), token, now) {
		t.Fatal("a good signature refused")
	}
	if SignedFileRequest("POST", q.Encode(), token, now) {
		t.Error("a read signature admitted a write")
	}
	if SignedFileRequest("GET", q.Encode(), "other", now) {
		t.Error("another token's signature admitted")
	}
	q.Set("path", "/etc/passwd")
	if SignedFileRequest("GET", q.Encode(), token, now) {
		t.Error("a signature admitted another path")
	}
	exp := "1800000100"
	q = url.Values{"path": {"/a"}, "signature": {fileSignature("/a", "write", "user", token, exp)}, "username": {"user"}, "signature_expiration": {exp}}
	if !SignedFileRequest("POST", q.Encode(), token, now) || SignedFileRequest("POST", q.Encode(), token, now.Add(time.Hour)) {
		t.Error("expiry not honoured")
	}
}
