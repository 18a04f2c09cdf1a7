package sandboxes

import (
	"context"
	"testing"
	"time"
)

// loggingDriver is the fake engine with a log: every container wrote lines.
type loggingDriver struct {
	*fakeDriver
	lines []LogLine
	asked LogQuery
}

func (d *loggingDriver) Logs(_ context.Context, _ string, q LogQuery) ([]LogLine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = q
	return d.lines, nil
}

// Logs reads a visible sandbox's output through the driver, capped at MaxLogLines whatever the driver returns; a
// missing sandbox is not_found; an engine without a log answers capability_not_supported.
func TestManagerLogs(t *testing.T) {
	ctx := context.Background()
	d := &loggingDriver{fakeDriver: newFakeDriver(t)}
	for i := range MaxLogLines + 5 {
		d.lines = append(d.lines, LogLine{Time: time.Unix(int64(i), 0), Stream: "stdout", Text: "x"})
	}
	m := startManagerOn(t, d, NewBoltStore(t.TempDir()+"/store.db"), Config{Profiles: []Profile{testProfile("a")}})
	sb, err := m.Create(ctx, CreateRequest{Profile: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, m, sb.ID)
	lines, err := m.Logs(ctx, sb.ID, LogQuery{Limit: 0})
	if err != nil || len(lines) != MaxLogLines || d.asked.Limit != MaxLogLines {
		t.Fatalf("logs: %d lines (asked %d) %v", len(lines), d.asked.Limit, err)
	}
	if lines, _ = m.Logs(ctx, sb.ID, LogQuery{Limit: 3}); len(lines) != 3 {
		t.Fatalf("limit 3: %d lines", len(lines))
	}
	if _, err := m.Logs(ctx, "sandbox-nope", LogQuery{}); ErrorCode(err) != CodeNotFound {
		t.Fatalf("missing sandbox: %v", err)
	}
	plain, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	if _, err := plain.Logs(ctx, sb.ID, LogQuery{}); ErrorCode(err) != CodeCapabilityAbsent {
		t.Fatalf("an engine without a log: %v", err)
	}
}

// SetEgress replaces a live sandbox's own policy (nil clears it) and the record keeps it across a restart; a
// profile that does not send everything through the egress proxy refuses one, and nothing changes.
func TestSetEgressLive(t *testing.T) {
	proxied := testProfile("proxied")
	proxied.Network = NetworkInternal
	proxied.Egress = &Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org"}}
	open := testProfile("open")
	open.Network = NetworkBridge
	d := newFakeDriver(t)
	path := t.TempDir() + "/store.db"
	cfg := Config{Profiles: []Profile{proxied, open}}
	m := startTestManager(t, d, path, cfg)
	ctx := context.Background()
	sb, err := m.Create(ctx, CreateRequest{Profile: "proxied"})
	if err != nil {
		t.Fatal(err)
	}
	eg := &SandboxEgress{Deny: []string{"evil.example.com"}, AllowAnyName: true}
	if got, err := m.SetEgress(ctx, sb.ID, eg); err != nil || got.Egress == nil || got.Egress.Deny[0] != "evil.example.com" {
		t.Fatalf("set: %+v %v", got, err)
	}
	_ = m.Close()
	m = startTestManager(t, d, path, cfg)
	if g, err := m.Get(ctx, sb.ID); err != nil || g.Egress == nil || g.Egress.Deny[0] != "evil.example.com" {
		t.Fatalf("after restart: %+v %v", g, err)
	}
	if g, err := m.SetEgress(ctx, sb.ID, nil); err != nil || g.Egress != nil {
		t.Fatalf("clear: %+v %v", g, err)
	}
	o, err := m.Create(ctx, CreateRequest{Profile: "open"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetEgress(ctx, o.ID, eg); ErrorCode(err) != CodeInvalid {
		t.Fatalf("egress on a bridge profile: %v", err)
	}
	if g, _ := m.Get(ctx, o.ID); g.Egress != nil {
		t.Fatalf("a refused change changed it: %+v", g.Egress)
	}
}
