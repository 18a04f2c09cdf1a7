package sandboxes

import (
	"context"
	"regexp"
	"testing"
	"time"
)

// TestUnguessableID: a create that asks for it gets UnguessableIDPrefix and 128 random bits with no '-' (E2B's
// proxy splits the host label on '-', and the id alone opens ports there), and never a warm member's ordinary
// id: the first such create of a profile is cold and turns its pool over to unguessable ids, which the next one
// claims warm; an ordinary create still takes whatever the pool holds.
func TestUnguessableID(t *testing.T) {
	p := testProfile("a")
	p.WarmPoolSize = 1
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{p}, WarmRefillPerSecond: 100, GCInterval: time.Hour})
	ctx := context.Background()
	unguessable := regexp.MustCompile(`^` + UnguessableIDPrefix + `[0-9a-f]{32}$`)
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	sb, err := m.Create(ctx, CreateRequest{Profile: "a", UnguessableID: true})
	if err != nil {
		t.Fatal(err)
	}
	if !unguessable.MatchString(sb.ID) || sb.LaunchType != LaunchCold {
		t.Fatalf("id %q launch %q, want %s + 32 hex digits, cold (the pool held an ordinary id)", sb.ID, sb.LaunchType, UnguessableIDPrefix)
	}
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	warm, err := m.Create(ctx, CreateRequest{Profile: "a", UnguessableID: true})
	if err != nil || !unguessable.MatchString(warm.ID) || warm.LaunchType != LaunchWarm {
		t.Fatalf("the second create: %+v %v, want a warm claim with an unguessable id", warm, err)
	}
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	plain, err := m.Create(ctx, CreateRequest{Profile: "a"})
	if err != nil || plain.LaunchType != LaunchWarm {
		t.Fatalf("an ordinary create: %+v %v, want a warm claim", plain, err)
	}
	other := testProfile("b")
	m2, _, _ := newTestManager(t, Config{Profiles: []Profile{other}})
	if sb, err := m2.Create(ctx, CreateRequest{Profile: "b"}); err != nil || !regexp.MustCompile(`^sandbox-[0-9a-f]{12}$`).MatchString(sb.ID) {
		t.Fatalf("an ordinary create keeps ordinary ids: %+v %v", sb, err)
	}
}

// TestSetTTL: the expiry moves to now + ttl, sooner or later than before; a sandbox without one gets one.
func TestSetTTL(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: time.Hour})
	before := time.Now()
	got, err := m.SetTTL(ctx, sb.ID, time.Minute)
	if err != nil || got.ExpiresAt.Before(before.Add(time.Minute)) || got.ExpiresAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("shorten: %+v %v", got, err)
	}
	forever, _ := m.Create(ctx, CreateRequest{Profile: "a", TTL: -1})
	if got, err := m.SetTTL(ctx, forever.ID, time.Hour); err != nil || got.ExpiresAt == nil {
		t.Fatalf("a TTL for one that had none: %+v %v", got, err)
	}
	if _, err := m.SetTTL(ctx, sb.ID, 0); ErrorCode(err) != CodeInvalid {
		t.Errorf("ttl 0: %v", err)
	}
	if _, err := m.SetTTL(ctx, "sandbox-000000000000", time.Hour); ErrorCode(err) != CodeNotFound {
		t.Errorf("missing: %v", err)
	}
}

// TestForkKeepsEgress is the attack: a sandbox whose own egress policy narrows its profile's forks itself; the fork
// must not reach more than its source. Before the fix a fork got only its profile's policy.
func TestForkKeepsEgress(t *testing.T) {
	proxied := testProfile("proxied")
	proxied.Network = NetworkInternal
	proxied.Egress = &Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org", "evil.example.com"}}
	d := &copyingDriver{fakeDriver: newFakeDriver(t)}
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Apply(ctx, Config{Profiles: []Profile{proxied}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	sb, err := m.Create(ctx, CreateRequest{Profile: "proxied", Owner: "o", Egress: &SandboxEgress{Allow: []string{"pypi.org"}}})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	res, err := m.Fork(ctx, sb.ID, ForkRequest{Metadata: map[string]string{"k": "v"}, UnguessableID: true})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Sandbox
	if f.Egress == nil || len(f.Egress.Allow) != 1 || f.Egress.Allow[0] != "pypi.org" || f.Egress.AllowAnyName {
		t.Errorf("the fork's egress is %+v, want its source's", f.Egress)
	}
	if f.Metadata["k"] != "v" || !regexp.MustCompile(`^`+UnguessableIDPrefix).MatchString(f.ID) {
		t.Errorf("the fork's metadata %v id %q", f.Metadata, f.ID)
	}
}
