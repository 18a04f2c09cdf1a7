package sandboxes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestRefillHoldsEndByFirstCallBoundOrDrop(t *testing.T) {
	at := time.Unix(1000, 0)
	tests := []struct {
		name string
		// run acts on holds of a (host a:1, sandbox sb-a, hash h1, until at+1s) and b (b:1, sb-b, h1, at+2s).
		run       func(h *refillHolds)
		now       time.Time
		wantHeld  int
		wantUntil time.Time
	}{
		{name: "both held", run: func(*refillHolds) {}, now: at, wantHeld: 2, wantUntil: at.Add(time.Second)},
		{name: "a's first call ends a's hold", run: func(h *refillHolds) {
			end := h.begin("a:1")
			if end == nil || !end() {
				t.Fatal("the first call did not end the hold")
			}
		}, now: at, wantHeld: 1, wantUntil: at.Add(2 * time.Second)},
		{name: "a second call while the first runs does not end it; the first does", run: func(h *refillHolds) {
			first := h.begin("a:1")
			if h.begin("a:1") != nil {
				t.Fatal("a second concurrent call took the hold")
			}
			if !first() {
				t.Fatal("the first call did not end the hold")
			}
		}, now: at, wantHeld: 1},
		{name: "a call to another host ends nothing", run: func(h *refillHolds) {
			if h.begin("c:1") != nil {
				t.Fatal("a call to an unheld host took a hold")
			}
		}, now: at, wantHeld: 2},
		{name: "a's bound passed", run: func(*refillHolds) {}, now: at.Add(time.Second), wantHeld: 1, wantUntil: at.Add(2 * time.Second)},
		{name: "a call that ends after the bound passed ends nothing more", run: func(h *refillHolds) {
			end := h.begin("a:1")
			h.active(at.Add(time.Second))
			if end() {
				t.Fatal("an expired hold was ended twice")
			}
		}, now: at, wantHeld: 1},
		{name: "a deleted claim's hold is dropped", run: func(h *refillHolds) { h.drop("sb-a") }, now: at, wantHeld: 1},
		{name: "all bounds passed", run: func(*refillHolds) {}, now: at.Add(time.Hour), wantHeld: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h refillHolds
			h.add("a:1", "sb-a", "h1", at.Add(time.Second))
			h.add("b:1", "sb-b", "h1", at.Add(2*time.Second))
			tt.run(&h)
			held, until := h.active(tt.now)
			if held["h1"] != tt.wantHeld {
				t.Fatalf("held %v, want %d", held, tt.wantHeld)
			}
			if !tt.wantUntil.IsZero() && !until.Equal(tt.wantUntil) {
				t.Fatalf("next bound %v, want %v", until, tt.wantUntil)
			}
			if tt.wantHeld == 0 && h.begin("b:1") != nil {
				t.Fatal("an empty set handed out a hold")
			}
		})
	}
}

// heldPool starts a Manager whose profile "p" keeps one warm member, each container with an agent of its own,
// and claims that member. It returns the claimed sandbox's target.
func heldPool(t *testing.T, hold time.Duration) (*Manager, *fakeDriver, Target) {
	t.Helper()
	d := newFakeDriver(t)
	var mu sync.Mutex
	d.agentFor = func(string) string {
		mu.Lock()
		defer mu.Unlock()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"status":"ok"}`))
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	p := testProfile("p")
	p.WarmPoolSize = 1
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{p}, WarmRefillHold: hold, WarmRefillPerSecond: 1000})
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	sb, err := m.Create(context.Background(), CreateRequest{Profile: "p"})
	if err != nil || sb.LaunchType != LaunchWarm {
		t.Fatalf("claim: %+v %v", sb, err)
	}
	return m, d, mustReady(t, m, sb.ID)
}

// assertRefillHeld runs a refill pass and checks it started nothing: the claim's refill still waits.
func assertRefillHeld(t *testing.T, m *Manager, d *fakeDriver, attempts int) {
	t.Helper()
	m.refillWarm(m.clock())
	s := poolOf(t, m, "p")
	d.mu.Lock()
	got := d.attempts
	d.mu.Unlock()
	if s.Ready+s.Starting != 0 || s.HeldRefills != 1 || got != attempts {
		t.Fatalf("the claim's refill did not wait: %+v, %d creates (want %d)", s, got, attempts)
	}
}

func createAttempts(d *fakeDriver) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempts
}

// The refill a claim triggers waits until the claimed sandbox's first call is over; the Manager's own probes of
// that agent do not count as that call.
func TestClaimRefillWaitsForTheFirstCall(t *testing.T) {
	m, d, target := heldPool(t, time.Hour)
	attempts := createAttempts(d)
	assertRefillHeld(t, m, d, attempts)
	if err := m.probeOnce(context.Background(), target.Addr); err != nil {
		t.Fatal(err)
	}
	assertRefillHeld(t, m, d, attempts)

	req, _ := http.NewRequestWithContext(agentapi.PinAgent(context.Background(), target.Addr), http.MethodPost,
		"http://"+target.Addr+"/v1/exec", strings.NewReader(`{"argv":["true"]}`))
	resp, err := m.AgentHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Answered but not read yet: the call is not over.
	assertRefillHeld(t, m, d, attempts)
	drainClose(resp)
	waitFor(t, func() bool { s := poolOf(t, m, "p"); return s.Ready == 1 && s.HeldRefills == 0 })
}

// A claimed sandbox nobody calls holds its refill only for warm_refill_hold.
func TestClaimRefillHoldIsBounded(t *testing.T) {
	m, _, _ := heldPool(t, 100*time.Millisecond)
	waitFor(t, func() bool { s := poolOf(t, m, "p"); return s.Ready == 1 && s.HeldRefills == 0 })
}

// Deleting the claimed sandbox ends its hold: no first call will come.
func TestClaimRefillHoldEndsWithTheSandbox(t *testing.T) {
	m, d, target := heldPool(t, time.Hour)
	assertRefillHeld(t, m, d, createAttempts(d))
	if err := m.Delete(context.Background(), target.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { s := poolOf(t, m, "p"); return s.Ready == 1 && s.HeldRefills == 0 })
}

// A negative warm_refill_hold refills at once, as before.
func TestClaimRefillHoldOff(t *testing.T) {
	m, _, _ := heldPool(t, -1)
	if s := poolOf(t, m, "p"); s.HeldRefills != 0 {
		t.Fatalf("held with the hold off: %+v", s)
	}
	waitFor(t, func() bool { return poolOf(t, m, "p").Ready == 1 })
}
