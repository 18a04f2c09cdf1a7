package sandboxes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// loopbackAgents gives every container d starts an agent of its own on an address of its own (127.0.0.2 and on,
// which Linux routes to the loopback device), as a sandbox network gives every container its own IP. reuse, when
// set, answers the address a new container gets instead (the engine handing a freed address to the next one).
type loopbackAgents struct {
	mu    sync.Mutex
	next  int
	byCID map[string]netip.Addr
	reuse func(cid string) (netip.Addr, bool)
}

func withLoopbackAgents(t *testing.T, d *fakeDriver) *loopbackAgents {
	t.Helper()
	a := &loopbackAgents{next: 2, byCID: map[string]netip.Addr{}}
	d.agentFor = func(cid string) string {
		a.mu.Lock()
		defer a.mu.Unlock()
		ip, ok := a.byCID[cid] // a container keeps its address across its starts, as on one Docker network
		if !ok && a.reuse != nil {
			ip, ok = a.reuse(cid)
		}
		if !ok {
			ip = netip.AddrFrom4([4]byte{127, 0, byte(a.next / 250), byte(a.next%250 + 2)})
			a.next++
		}
		a.byCID[cid] = ip
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			t.Errorf("agent on %s: %v", ip, err)
			return "127.0.0.1:1"
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"status":"ok"}`))
		}))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	return a
}

// ipOf is the address the agent of sandbox id was given (an invalid one, and an error, when it has none).
func (a *loopbackAgents) ipOf(t *testing.T, m *Manager, id string) netip.Addr {
	t.Helper()
	m.mu.RLock()
	cid := ""
	if e := m.entries[id]; e != nil {
		cid = e.rec.ContainerID
	}
	m.mu.RUnlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	ip, ok := a.byCID[cid]
	if !ok {
		t.Errorf("sandbox %s (container %q) has no agent address", id, cid)
	}
	return ip
}

// wantSource checks what BySource answers for ip: the sandbox named want, or nothing when want is "".
func wantSource(t *testing.T, m *Manager, ip netip.Addr, want string) {
	t.Helper()
	got, ok := m.BySource(ip)
	switch {
	case want == "" && ok:
		t.Fatalf("source %s: matched %s, want nothing", ip, got.Sandbox.ID)
	case want != "" && !ok:
		t.Fatalf("source %s: no match, want %s", ip, want)
	case want != "" && got.Sandbox.ID != want:
		t.Fatalf("source %s: matched %s, want %s", ip, got.Sandbox.ID, want)
	}
}

// checkSourceIndex checks the index against the entries: every entry with an agent address is under it, and the
// index holds nothing else (no entry that left, none under an address it no longer has). It returns how many
// addresses the index holds.
func checkSourceIndex(t *testing.T, m *Manager) int {
	t.Helper()
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for ip, es := range m.sources {
		for _, e := range es {
			n++
			if m.entries[e.rec.ID] != e {
				t.Errorf("index %s holds %s, which is not an entry", ip, e.rec.ID)
			}
			if a, ok := sourceAddr(e.rec.Addr); !ok || a != ip {
				t.Errorf("index %s holds %s, whose address is %q", ip, e.rec.ID, e.rec.Addr)
			}
		}
	}
	want := 0
	for _, e := range m.entries {
		if _, ok := sourceAddr(e.rec.Addr); ok {
			want++
		}
	}
	if n != want {
		t.Errorf("index holds %d entries, %d entries have an address", n, want)
	}
	return len(m.sources)
}

// TestSourceIndexFollowsAttachAndDetach: a sandbox is found by its agent's address while it runs and by no address
// once it is stopped, paused or deleted; the profile comes with it.
func TestSourceIndexFollowsAttachAndDetach(t *testing.T) {
	d := &copyingDriver{fakeDriver: newFakeDriver(t)} // a fake engine that can pause
	agents := withLoopbackAgents(t, d.fakeDriver)
	p := testProfile("p")
	p.Egress = &Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org"}}
	m := startManagerOn(t, d, NewBoltStore(t.TempDir()+"/store.db"), Config{Profiles: []Profile{p}})
	ctx := context.Background()
	a, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, a.ID)
	mustReady(t, m, b.ID)
	ipA, ipB := agents.ipOf(t, m, a.ID), agents.ipOf(t, m, b.ID)
	if ipA == ipB {
		t.Fatalf("both agents on %s", ipA)
	}
	got, ok := m.BySource(ipA)
	if !ok || got.Sandbox.ID != a.ID || got.Sandbox.Owner != "alice" || got.Profile.Egress == nil || got.Profile.Egress.Allow[0] != "pypi.org" {
		t.Fatalf("source %s: %+v %v", ipA, got, ok)
	}
	wantSource(t, m, ipB, b.ID)
	wantSource(t, m, netip.MustParseAddr("127.0.9.9"), "")
	wantSource(t, m, netip.MustParseAddr("::ffff:"+ipA.String()), "") // as the old page-through compared: unmapped only
	checkSourceIndex(t, m)

	steps := []struct {
		name string
		do   func() error
		want string // what ipA finds after the step
	}{
		{"paused", func() error { _, err := m.Pause(ctx, a.ID); return err }, ""},
		{"resumed", func() error { _, err := m.Resume(ctx, a.ID); return err }, a.ID},
		{"stopped", func() error { return m.Stop(ctx, a.ID) }, ""},
		{"started again", func() error { _, err := m.EnsureRunning(ctx, a.ID); return err }, a.ID},
		{"deleted", func() error { return m.Delete(ctx, a.ID) }, ""},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		wantSource(t, m, ipA, s.want)
		wantSource(t, m, ipB, b.ID)
		checkSourceIndex(t, m)
	}
	if left := checkSourceIndex(t, m); left != 1 {
		t.Fatalf("index keeps %d addresses, want b's alone", left)
	}
}

// TestSourceIndexSkipsWarmAndDead: a warm member is the pool's until claimed; a dead sandbox keeps its old address
// in its record, and a new sandbox given that address by the engine is the one found.
func TestSourceIndexSkipsWarmAndDead(t *testing.T) {
	d := newFakeDriver(t)
	agents := withLoopbackAgents(t, d)
	p := testProfile("p")
	p.WarmPoolSize = 1
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{testProfile("q"), p}})
	ctx := context.Background()
	waitFor(t, func() bool { return m.WarmReady() == 1 })
	m.mu.RLock()
	var warmIP netip.Addr
	for _, e := range m.entries {
		warmIP, _ = sourceAddr(e.rec.Addr)
	}
	m.mu.RUnlock()
	wantSource(t, m, warmIP, "")
	claimed, err := m.Create(ctx, CreateRequest{Profile: "p"})
	if err != nil || claimed.LaunchType != LaunchWarm {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	mustReady(t, m, claimed.ID)
	wantSource(t, m, warmIP, claimed.ID)

	dead, err := m.Create(ctx, CreateRequest{Profile: "q"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, dead.ID)
	deadIP := agents.ipOf(t, m, dead.ID)
	m.mu.RLock()
	cid := m.entries[dead.ID].rec.ContainerID
	m.mu.RUnlock()
	d.die(cid, 137, false)
	waitFor(t, func() bool { sb, _ := m.Get(ctx, dead.ID); return sb.Died != nil })
	wantSource(t, m, deadIP, "")
	agents.mu.Lock()
	agents.reuse = func(string) (netip.Addr, bool) { return deadIP, true }
	agents.mu.Unlock()
	heir, err := m.Create(ctx, CreateRequest{Profile: "q"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, heir.ID)
	wantSource(t, m, deadIP, heir.ID)
	checkSourceIndex(t, m)
}

// TestSourceIndexAfterRestart: a restarted gateway finds the sandboxes it adopted by their addresses, and none
// whose container went away while it was down.
func TestSourceIndexAfterRestart(t *testing.T) {
	d := newFakeDriver(t)
	agents := withLoopbackAgents(t, d)
	cfg := Config{Profiles: []Profile{testProfile("p")}}
	path := t.TempDir() + "/store.db"
	m := startTestManager(t, d, path, cfg)
	ctx := context.Background()
	kept, _ := m.Create(ctx, CreateRequest{Profile: "p"})
	lost, _ := m.Create(ctx, CreateRequest{Profile: "p"})
	mustReady(t, m, kept.ID)
	mustReady(t, m, lost.ID)
	keptIP, lostIP := agents.ipOf(t, m, kept.ID), agents.ipOf(t, m, lost.ID)
	m.mu.RLock()
	lostCID := m.entries[lost.ID].rec.ContainerID
	m.mu.RUnlock()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	_ = d.Remove(ctx, lostCID)

	m2 := startTestManager(t, d, path, cfg)
	waitFor(t, func() bool { sb, _ := m2.Get(ctx, kept.ID); return sb != nil && sb.Status == StatusReady })
	wantSource(t, m2, keptIP, kept.ID)
	wantSource(t, m2, lostIP, "")
	checkSourceIndex(t, m2)
	if _, err := m2.EnsureRunning(ctx, lost.ID); ErrorCode(err) != CodeNotReady { // the rebuild begins
		t.Fatalf("first use of the vanished sandbox: %v", err)
	}
	waitFor(t, func() bool { sb, _ := m2.Get(ctx, lost.ID); return sb.Status == StatusReady })
	wantSource(t, m2, lostIP, "") // rebuilt: a new container, a new address
	wantSource(t, m2, agents.ipOf(t, m2, lost.ID), lost.ID)
	checkSourceIndex(t, m2)
}

// TestSourceIndexConcurrent: lookups run while sandboxes are made, stopped, started and deleted (run with -race);
// a running sandbox is always found at its address, and the index ends as the entries are.
func TestSourceIndexConcurrent(t *testing.T) {
	d := newFakeDriver(t)
	agents := withLoopbackAgents(t, d)
	m := startTestManager(t, d, t.TempDir()+"/store.db", Config{Profiles: []Profile{testProfile("p")}})
	ctx := context.Background()
	stop := make(chan struct{})
	var lookups sync.WaitGroup
	for range 4 {
		lookups.Add(1)
		go func() {
			defer lookups.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m.BySource(netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i%40)}))
			}
		}()
	}
	var work sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		work.Add(1)
		go func() {
			defer work.Done()
			for round := range 3 {
				sb, err := m.Create(ctx, CreateRequest{Profile: "p", Owner: fmt.Sprint("w", w)})
				if err != nil {
					errs <- err
					return
				}
				if _, err := m.EnsureRunning(ctx, sb.ID); err != nil {
					errs <- err
					return
				}
				if got, ok := m.BySource(agents.ipOf(t, m, sb.ID)); !ok || got.Sandbox.ID != sb.ID {
					errs <- fmt.Errorf("running %s not found at its address: %+v %v", sb.ID, got, ok)
					return
				}
				if round%2 == 0 {
					err = m.Stop(ctx, sb.ID)
				} else {
					err = m.Delete(ctx, sb.ID)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	work.Wait()
	close(stop)
	lookups.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if left := checkSourceIndex(t, m); left != 0 {
		t.Fatalf("index keeps %d addresses with every sandbox stopped or deleted", left)
	}
}
