package caddymodule_test

import (
	"strings"
	"testing"
)

// TestRedisCaddyfileErrors: a wrong `storage redis` or `replay_redis` block is a clear adapt error, never a
// silently in-memory or file-system fallback.
func TestRedisCaddyfileErrors(t *testing.T) {
	site := func(block string) string {
		return "https://gw.localhost {\n\tsandbox_ticket {\n\t\treplay_redis {\n" + block + "\n\t\t}\n\t}\n}\n"
	}
	storage := func(block string) string {
		return "{\n\tstorage redis {\n" + block + "\n\t}\n}\n\nhttps://gw.localhost {\n\trespond ok\n}\n"
	}
	for _, tc := range []struct {
		name, caddyfile, want string
	}{
		{"replay without address", site("\t\t\tpassword x"), "address is required"},
		{"replay unknown option", site("\t\t\taddress 127.0.0.1:6379\n\t\t\tcluster on"), `unknown redis option "cluster"`},
		{"replay bad db", site("\t\t\taddress 127.0.0.1:6379\n\t\t\tdb -1"), "db must be a database number"},
		{"replay two addresses", site("\t\t\taddress a:1 b:2"), "wrong argument count"},
		{"replay unknown tls option", site("\t\t\taddress a:1\n\t\t\ttls {\n\t\t\t\tinsecure\n\t\t\t}"), `unknown redis tls option "insecure"`},
		{"storage without address", storage("\t\tkey_prefix x:"), "address is required"},
		{"storage lock_ttl", storage("\t\taddress a:1\n\t\tlock_ttl never"), "lock_ttl must be a positive duration"},
		{"storage lock_ttl only valid there", site("\t\t\taddress a:1\n\t\t\tlock_ttl 10s"), `unknown redis option "lock_ttl"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adaptToJSON(tc.caddyfile)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
