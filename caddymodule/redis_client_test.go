package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/redisstore"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestRedisConfigTLS: `tls { ca_file }` reaches a TLS-only redis-server and verifies its certificate: without the
// CA (system roots) the handshake is refused, and without `tls` nothing is spoken at all.
func TestRedisConfigTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server: runs without -short")
	}
	r := testenv.StartRedisTLS(t)
	t.Setenv("FLEET_TEST_REDIS_PASSWORD", r.Password)
	ctx := context.Background()
	ping := func(c *RedisConfig) error {
		t.Helper()
		cl, _, key, err := redisClient(c)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = releaseRedis(key) }()
		return cl.Ping(ctx).Err()
	}
	good := &RedisConfig{Address: r.Addr, Password: "{env.FLEET_TEST_REDIS_PASSWORD}", TLS: &RedisTLS{CAFile: r.CAPath}}
	if err := ping(good); err != nil {
		t.Fatalf("TLS with the CA: %v", err)
	}
	if err := ping(&RedisConfig{Address: r.Addr, Password: r.Password, TLS: &RedisTLS{}}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("TLS without the CA must fail verification, got %v", err)
	}
	if err := ping(&RedisConfig{Address: r.Addr, Password: r.Password}); err == nil {
		t.Fatal("plain TCP to a TLS-only redis answered")
	}
}

// TestRedisConfigErrors: a bad CA file or a missing address is an error at provision, and one target shares one
// pooled client.
func TestRedisConfigErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*RedisConfig{
		{},
		{Address: "127.0.0.1:1", TLS: &RedisTLS{CAFile: filepath.Join(dir, "missing.pem")}},
		{Address: "127.0.0.1:1", TLS: &RedisTLS{CAFile: notPEM}},
		{Address: "127.0.0.1:1", DB: -1},
	} {
		if _, _, _, err := redisClient(c); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
	a, pa, ka, err := redisClient(&RedisConfig{Address: "127.0.0.1:1", Password: "x"})
	if err != nil {
		t.Fatal(err)
	}
	b, pb, kb, err := redisClient(&RedisConfig{Address: "127.0.0.1:1", Password: "x", KeyPrefix: "other:"})
	if err != nil {
		t.Fatal(err)
	}
	if a != b || ka != kb || pa != redisstore.DefaultKeyPrefix || pb != "other:" {
		t.Fatalf("one target, two clients or wrong prefixes: %p %p %q %q", a, b, pa, pb)
	}
	_ = releaseRedis(ka)
	_ = releaseRedis(kb)
	if _, loaded := redisClients.p.References(ka); loaded {
		t.Fatal("the client outlived its last reference")
	}
}
