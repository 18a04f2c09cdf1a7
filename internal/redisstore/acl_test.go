package redisstore

import (
	"context"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/tickets"
)

// gatewayACL is the least-privilege Redis user docs/kubernetes.md recommends: its keys only, and only the commands
// the stores send or their scripts call. The test proves the list is enough.
var gatewayACL = []string{
	"resetkeys", "~sandgate:*", "resetchannels", "-@all",
	"+evalsha", "+eval", "+config|get", "+set", "+get", "+exists", "+del", "+pexpire", "+hset", "+hget", "+hmget",
	"+hstrlen", "+zadd", "+zrange", "+multi", "+exec",
	// called by the scripts
	"+time", "+zremrangebyscore", "+zremrangebylex", "+zrangebylex", "+zcard", "+zrem", "+pexpireat",
}

// TestStoresUnderLeastPrivilegeACL runs both stores as an ACL user limited to the prefix and gatewayACL.
func TestStoresUnderLeastPrivilegeACL(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	admin := client(t, r)
	args := []any{"ACL", "SETUSER", "gateway", "on", ">gw-password"}
	for _, a := range gatewayACL {
		args = append(args, a)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	gw, err := NewClient(Options{Addr: r.Addr, Username: "gateway", Password: "gw-password"})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()

	spent, _ := NewSpentNonces(gw, "sandgate:tickets:x:", 10)
	v, err := tickets.NewVerifier(tickets.VerifierConfig{Secret: secret, Spent: spent})
	if err != nil {
		t.Fatal(err)
	}
	tok := issue(t, newIssuer(t), "alice")
	if _, err := v.Verify(tok, want); err != nil {
		t.Fatalf("spend as the gateway user: %v", err)
	}
	if _, err := v.Verify(tok, want); reason(err) != tickets.ReasonReplayed {
		t.Fatalf("replay as the gateway user: %v", err)
	}

	s := NewStorage(gw, "sandgate:certmagic:", 0)
	if err := s.Store(ctx, "certificates/a/a.crt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "certificates/a/a.crt"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "certificates/a/a.crt"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "certificates", true); err != nil {
		t.Fatal(err)
	}
	if !s.Exists(ctx, "certificates/a") {
		t.Fatal("exists as the gateway user")
	}
	if err := s.Lock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "certificates"); err != nil {
		t.Fatal(err)
	}
	// The user is confined to the prefix: another prefix is refused.
	other := NewStorage(gw, "other:", 0)
	if err := other.Store(ctx, "k", []byte("v")); err == nil {
		t.Fatal("stored outside the prefix")
	}
	if _, err := other.Load(ctx, "k"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("load outside the prefix: %v", err)
	}
}
