package redisstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigResolve: placeholders are expanded everywhere, the prefix has its default, a bad CA file or a missing
// address is an error, and the target key tells targets apart without holding the password.
func TestConfigResolve(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	expand := strings.NewReplacer("{env.PW}", "s3cret", "{env.ADDR}", "10.0.0.1:6379").Replace
	o, prefix, target, err := (&Config{Address: "{env.ADDR}", Password: "{env.PW}", DB: 2}).Resolve(expand)
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "10.0.0.1:6379" || o.Password != "s3cret" || o.DB != 2 || o.TLS != nil || prefix != DefaultKeyPrefix {
		t.Errorf("resolved %+v, prefix %q", o, prefix)
	}
	if strings.Contains(target, "s3cret") || len(target) != 64 {
		t.Errorf("target key %q: want a hash", target)
	}
	_, prefix, other, err := (&Config{Address: "10.0.0.1:6379", Password: "other", KeyPrefix: "fleet2:"}).Resolve(expand)
	if err != nil || other == target || prefix != "fleet2:" {
		t.Errorf("another password: key %q (first %q), prefix %q, %v", other, target, prefix, err)
	}
	o, _, _, err = (&Config{Address: "h:1", TLS: &TLSConfig{ServerName: "redis.internal"}}).Resolve(expand)
	if err != nil || o.TLS == nil || o.TLS.ServerName != "redis.internal" || o.TLS.RootCAs != nil {
		t.Errorf("tls without a CA file: %+v, %v", o.TLS, err)
	}
	for _, c := range []*Config{
		{},
		{Address: "h:1", TLS: &TLSConfig{CAFile: filepath.Join(dir, "missing.pem")}},
		{Address: "h:1", TLS: &TLSConfig{CAFile: notPEM}},
	} {
		if _, _, _, err := c.Resolve(expand); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestParseDB(t *testing.T) {
	if n, err := ParseDB("3"); err != nil || n != 3 {
		t.Fatalf("3: %d %v", n, err)
	}
	for _, v := range []string{"-1", "x", ""} {
		if _, err := ParseDB(v); err == nil || !strings.Contains(err.Error(), "database number") {
			t.Errorf("%q: %v", v, err)
		}
	}
}
