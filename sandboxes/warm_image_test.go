package sandboxes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// imageProfile is a profile whose creates may name any image under registry.example/ (and flood/ for the attack).
func imageProfile(warmImages, warmPoolMax int) Profile {
	p := testProfile("any")
	p.AllowedImages = []string{"registry.example/*:*", "flood/*:*"}
	p.WarmImages, p.WarmPoolMax = warmImages, warmPoolMax
	return p
}

// startClocked starts a Manager over the fake driver whose warm pools follow clock.
func startClocked(t *testing.T, p Profile, cfg Config) (*Manager, *fakeDriver, *fakeClock) {
	t.Helper()
	d := newFakeDriver(t)
	clock := &fakeClock{now: t0}
	m, err := NewManager(ManagerConfig{Namespace: "unit"}, d, NewBoltStore(t.TempDir()+"/store.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.clock = clock.Now
	cfg.Profiles = []Profile{p}
	if cfg.WarmRefillPerSecond == 0 {
		cfg.WarmRefillPerSecond = 1000
	}
	cfg.WarmDemandWindow, cfg.GCInterval, cfg.MaxConcurrentStarts = time.Minute, time.Hour, 8
	if err := m.Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, d, clock
}

// imageCreate asks for spec ("image" or "image|entrypoint") under the profile "any".
func imageCreate(owner, spec string, env map[string]string) CreateRequest {
	image, entry, _ := strings.Cut(spec, "|")
	req := ImageRequest{Image: image}
	if entry != "" {
		req.Entrypoint = []string{entry}
	}
	return CreateRequest{Profile: "any", Owner: owner, Image: &req, Env: env}
}

// settled reports whether every kept shape's pool holds its target, ready.
func settled(m *Manager) bool {
	for _, s := range m.WarmImagePools() {
		if s.Ready != s.Target || s.Starting != 0 {
			return false
		}
	}
	return true
}

// TestWarmImagePoolsFollowDemand: each shape asked for keeps a warm spare, a burst grows its pool up to
// warm_pool_max, at most warm_images shapes are kept (the least recently asked goes), and a profile without
// warm_images keeps none.
func TestWarmImagePoolsFollowDemand(t *testing.T) {
	type pool struct {
		image string
		ready int
	}
	tests := []struct {
		name                    string
		warmImages, warmPoolMax int
		asks                    [][]string // each group arrives at one instant, a second after the previous
		want                    []pool     // sorted as WarmImagePools sorts them (image, then shape)
	}{
		{"an image asked once keeps one spare", 4, 0, [][]string{{"registry.example/a:1"}},
			[]pool{{"registry.example/a:1", 1}}},
		{"each image asked keeps its own", 4, 0, [][]string{{"registry.example/a:1"}, {"registry.example/b:1"}},
			[]pool{{"registry.example/a:1", 1}, {"registry.example/b:1", 1}}},
		{"past warm_images the least recently asked image goes", 2, 0,
			[][]string{{"registry.example/a:1"}, {"registry.example/b:1"}, {"registry.example/a:1"}, {"registry.example/c:1"}},
			[]pool{{"registry.example/a:1", 1}, {"registry.example/c:1", 1}}},
		{"a burst grows the image's pool up to warm_pool_max", 4, 3,
			[][]string{{"registry.example/a:1", "registry.example/a:1", "registry.example/a:1", "registry.example/a:1"}},
			[]pool{{"registry.example/a:1", 3}}},
		{"another entrypoint is another shape", 4, 0, [][]string{{"registry.example/a:1"}, {"registry.example/a:1|/bin/other"}},
			[]pool{{"registry.example/a:1", 1}, {"registry.example/a:1", 1}}},
		{"no warm_images: no pool", 0, 0, [][]string{{"registry.example/a:1"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, clock := startClocked(t, imageProfile(tt.warmImages, tt.warmPoolMax), Config{})
			ctx := context.Background()
			for _, group := range tt.asks {
				for _, spec := range group {
					if _, err := m.Create(ctx, imageCreate("alice", spec, nil)); err != nil {
						t.Fatal(err)
					}
				}
				kick(m.warmKick)
				waitFor(t, func() bool { return settled(m) })
				clock.Advance(time.Second)
			}
			waitFor(t, func() bool {
				var got []pool
				for _, s := range m.WarmImagePools() {
					got = append(got, pool{s.Image, s.Ready})
				}
				return slices.Equal(got, tt.want)
			})
		})
	}
}

// TestWarmImageClaimIsTheCreates: a member of an image's pool is made in the waiting form, without any create's
// environment; a create of that shape claims it (warm, ready) and its agent gets the create's environment and
// loses the waiting form, the create's owner and metadata are the sandbox's, and a start after a stop sends the
// same claim again. A create of another shape, or with a workspace, is cold.
func TestWarmImageClaimIsTheCreates(t *testing.T) {
	m, d, _ := startClocked(t, imageProfile(2, 0), Config{})
	ctx := context.Background()
	const image = "registry.example/fastgpt:1"
	if _, err := m.Create(ctx, imageCreate("alice", image, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { p := m.WarmImagePools(); return len(p) == 1 && p[0].Ready == 1 })
	d.mu.Lock()
	for _, c := range d.containers {
		if c.spec.Env[agentapi.EnvAwaitClaim] == "1" && c.spec.Env["SESSION"] != "" {
			t.Errorf("a warm member holds a create's environment: %v", c.spec.Env)
		}
	}
	d.mu.Unlock()

	sb, err := m.Create(ctx, CreateRequest{Profile: "any", Owner: "bob", Image: &ImageRequest{Image: image},
		Env: map[string]string{"SESSION": "s-1"}, Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.LaunchType != LaunchWarm || sb.Status != StatusReady || sb.Owner != "bob" || sb.Metadata["k"] != "v" {
		t.Fatalf("the claim: %+v", sb)
	}
	m.mu.RLock()
	rec := m.entries[sb.ID].rec
	m.mu.RUnlock()
	if !rec.AwaitsClaim || rec.Warm || rec.Env["SESSION"] != "s-1" {
		t.Fatalf("the claimed record: %+v", rec)
	}
	d.mu.Lock()
	c := d.claims[rec.Token]
	d.mu.Unlock()
	if c.Set["SESSION"] != "s-1" || !slices.Contains(c.Unset, agentapi.EnvAwaitClaim) {
		t.Fatalf("the claim the agent got: %+v", c)
	}
	for k := range c.Set {
		if k == agentapi.EnvToken || k == agentapi.EnvTokenDigest || k == agentapi.EnvSandboxID {
			t.Errorf("the claim resends %s, which the container already holds", k)
		}
	}
	if s := m.WarmImagePools()[0]; s.Hits != 1 || s.Misses != 1 {
		t.Errorf("pool figures after a miss and a hit: %+v", s)
	}

	// A stop and a start: the container keeps its waiting form, so the start claims it again.
	if err := m.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	delete(d.claims, rec.Token)
	d.mu.Unlock()
	mustReady(t, m, sb.ID)
	d.mu.Lock()
	again := d.claims[rec.Token]
	d.mu.Unlock()
	if again.Set["SESSION"] != "s-1" {
		t.Fatalf("the start after a stop claimed %+v", again)
	}

	// Another entrypoint is another shape; a workspace is never a pool's.
	waitFor(t, func() bool { p := m.WarmImagePools(); return len(p) == 1 && p[0].Ready == 1 })
	other, err := m.Create(ctx, imageCreate("bob", image+"|/bin/other", nil))
	if err != nil || other.LaunchType != LaunchCold {
		t.Fatalf("another entrypoint: %+v %v", other, err)
	}
}

// TestWarmImageClaimThatFailsGoesCold: an agent that refuses its claim costs the create nothing but time: the
// member is removed and the create is made cold.
func TestWarmImageClaimThatFailsGoesCold(t *testing.T) {
	m, d, _ := startClocked(t, imageProfile(2, 0), Config{})
	ctx := context.Background()
	const image = "registry.example/fastgpt:1"
	if _, err := m.Create(ctx, imageCreate("alice", image, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { p := m.WarmImagePools(); return len(p) == 1 && p[0].Ready == 1 })
	d.mu.Lock()
	d.refuseClaims = true
	d.mu.Unlock()
	sb, err := m.Create(ctx, imageCreate("bob", image, map[string]string{"SESSION": "s-2"}))
	if err != nil {
		t.Fatal(err)
	}
	if sb.LaunchType != LaunchCold || sb.Owner != "bob" {
		t.Fatalf("after a failed claim: %+v", sb)
	}
	if s := m.WarmImagePools()[0]; s.Hits != 0 || s.ClaimFailures != 1 || s.Misses != 2 {
		t.Errorf("pool figures after a failed claim: %+v", s)
	}
}

// TestWarmImagePoolDecays: an image not asked for over warm_demand_window loses its pool and its members.
func TestWarmImagePoolDecays(t *testing.T) {
	m, _, clock := startClocked(t, imageProfile(4, 0), Config{})
	ctx := context.Background()
	for _, img := range []string{"registry.example/a:1", "registry.example/b:1"} {
		if _, err := m.Create(ctx, imageCreate("alice", img, nil)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return len(m.WarmImagePools()) == 2 && settled(m) })
	clock.Advance(40 * time.Second)
	if _, err := m.Create(ctx, imageCreate("alice", "registry.example/b:1", nil)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second) // a's ask left the one-minute window, b's did not
	kick(m.warmKick)
	waitFor(t, func() bool {
		p := m.WarmImagePools()
		return len(p) == 1 && p[0].Image == "registry.example/b:1" && p[0].Ready == 1
	})
	clock.Advance(time.Minute)
	kick(m.warmKick)
	waitFor(t, func() bool { return len(m.WarmImagePools()) == 0 && warmImageMembers(m) == 0 })
}

// warmImageMembers counts the members of every pool by image, ready or starting.
func warmImageMembers(m *Manager) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, e := range m.entries {
		if e.rec.Warm && e.rec.ImageWarm && !e.deleted {
			n++
		}
	}
	return n
}

// TestWarmImageFloodIsBounded is the attack: a tenant names a new image (all allowed, all on the engine) in every
// create, hoping each keeps a warm container. At most warm_images shapes are kept, each at most warm_pool_max
// members, so the engine never holds more warm containers than warm_images × warm_pool_max, however many names
// the tenant sends.
func TestWarmImageFloodIsBounded(t *testing.T) {
	const warmImages, warmPoolMax, flood = 3, 2, 60
	m, d, clock := startClocked(t, imageProfile(warmImages, warmPoolMax), Config{})
	ctx := context.Background()
	for i := range flood {
		// Two at one instant: each shape's demand asks for more than one member.
		for range 2 {
			sb, err := m.Create(ctx, imageCreate("mallory", fmt.Sprintf("flood/img-%d:1", i), nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Delete(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(m.WarmImagePools()); n > warmImages {
			t.Fatalf("after %d images: %d pools kept, warm_images is %d", i+1, n, warmImages)
		}
		clock.Advance(10 * time.Millisecond)
	}
	kick(m.warmKick)
	waitFor(t, func() bool { return settled(m) && warmImageMembers(m) == warmImages*warmPoolMax })
	d.mu.Lock()
	peak := d.peakAwaiting
	d.mu.Unlock()
	if peak > warmImages*warmPoolMax {
		t.Fatalf("the engine held %d warm containers at once, the bound is %d", peak, warmImages*warmPoolMax)
	}
	// The last images asked are the ones kept.
	for _, s := range m.WarmImagePools() {
		var n int
		if _, err := fmt.Sscanf(s.Image, "flood/img-%d:1", &n); err != nil || n < flood-warmImages {
			t.Errorf("kept %s, not one of the last %d asked", s.Image, warmImages)
		}
	}
}

// TestWarmImagePoolsAcrossAReload: the pools by image are the Manager's, which a config reload keeps. A reload that
// leaves the profile's shape as it was keeps each pool and its members; one that changes it (its memory) makes each
// shape's derived profile another, so the pool and its members go and the next create starts it over.
func TestWarmImagePoolsAcrossAReload(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Profile)
		kept   bool
	}{
		{"the same profile", func(*Profile) {}, true},
		{"another description and warm_images", func(p *Profile) { p.Description, p.WarmImages = "x", 3 }, true},
		{"another memory limit", func(p *Profile) { p.Resources.Memory = "512m" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := imageProfile(2, 0)
			m, _, _ := startClocked(t, p, Config{})
			ctx := context.Background()
			if _, err := m.Create(ctx, imageCreate("alice", "registry.example/a:1", nil)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { s := m.WarmImagePools(); return len(s) == 1 && s[0].Ready == 1 })
			before := m.WarmImagePools()[0].Hash
			members := func() []string {
				m.mu.RLock()
				defer m.mu.RUnlock()
				return slices.Clone(m.warm[before])
			}
			was := members()
			tt.change(&p)
			if err := m.Apply(ctx, Config{Profiles: []Profile{p}, WarmRefillPerSecond: 1000, WarmDemandWindow: time.Minute,
				GCInterval: time.Hour, MaxConcurrentStarts: 8}); err != nil {
				t.Fatal(err)
			}
			kick(m.warmKick)
			if tt.kept {
				waitFor(t, func() bool { return settled(m) })
				if s := m.WarmImagePools(); len(s) != 1 || s[0].Hash != before || !slices.Equal(members(), was) {
					t.Fatalf("after the reload: %+v members %v, want %v", s, members(), was)
				}
				return
			}
			waitFor(t, func() bool { return len(m.WarmImagePools()) == 0 && warmImageMembers(m) == 0 })
			sb, err := m.Create(ctx, imageCreate("alice", "registry.example/a:1", nil))
			if err != nil || sb.LaunchType != LaunchCold {
				t.Fatalf("the first create after the change: %+v %v", sb, err)
			}
			waitFor(t, func() bool { s := m.WarmImagePools(); return len(s) == 1 && s[0].Hash != before && s[0].Ready == 1 })
		})
	}
}
