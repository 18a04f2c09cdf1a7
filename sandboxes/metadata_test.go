package sandboxes

import (
	"context"
	"strings"
	"testing"
)

func TestMetadataIsStoredFilteredPatchedAndKeptAcrossRestarts(t *testing.T) {
	d := newFakeDriver(t)
	path := t.TempDir() + "/store.db"
	cfg := Config{Profiles: []Profile{testProfile("a")}}
	m := startTestManager(t, d, path, cfg)
	ctx := context.Background()
	a, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: "o", Metadata: map[string]string{"sessionId": "s1", "team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: "o", Metadata: map[string]string{"sessionId": "s2"}}); err != nil {
		t.Fatal(err)
	}
	if a.Metadata["sessionId"] != "s1" {
		t.Fatalf("create answered metadata %v", a.Metadata)
	}
	got, _, _ := m.List(ctx, ListOptions{Metadata: map[string]string{"sessionId": "s1"}})
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("filter sessionId=s1: %v", got)
	}
	if got, _, _ := m.List(ctx, ListOptions{Metadata: map[string]string{"sessionId": "s1", "team": "y"}}); len(got) != 0 {
		t.Fatalf("every pair must match: %v", got)
	}
	v := "z"
	sb, err := m.PatchMetadata(ctx, a.ID, map[string]*string{"team": nil, "env": &v})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sb.Metadata["team"]; ok || sb.Metadata["env"] != "z" || sb.Metadata["sessionId"] != "s1" {
		t.Fatalf("merge patch: %v", sb.Metadata)
	}
	// The answer is a copy: changing it changes nothing stored.
	sb.Metadata["sessionId"] = "changed"
	if g, _ := m.Get(ctx, a.ID); g.Metadata["sessionId"] != "s1" {
		t.Fatalf("metadata aliased: %v", g.Metadata)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := startTestManager(t, d, path, cfg)
	if g, err := m2.Get(ctx, a.ID); err != nil || g.Metadata["env"] != "z" || g.Metadata["sessionId"] != "s1" {
		t.Fatalf("after restart: %+v %v", g, err)
	}
}

func TestMetadataBounds(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	many := map[string]string{}
	for i := range MaxMetadataEntries + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, md := range map[string]map[string]string{
		"too many":   many,
		"empty key":  {"": "v"},
		"key with =": {"a=b": "v"},
		"long value": {"k": strings.Repeat("v", MaxMetadataValueBytes+1)},
		"bad utf8":   {"k": "\xff"},
	} {
		if _, err := m.Create(ctx, CreateRequest{Profile: "a", Metadata: md}); ErrorCode(err) != CodeInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if items, _, _ := m.List(ctx, ListOptions{}); len(items) != 0 {
		t.Fatalf("a refused create left %d sandboxes", len(items))
	}
	sb, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	bad := "\xff"
	if _, err := m.PatchMetadata(ctx, sb.ID, map[string]*string{"k": &bad}); ErrorCode(err) != CodeInvalid {
		t.Fatalf("patch with a bad value: %v", err)
	}
	if _, err := m.PatchMetadata(ctx, "sandbox-none", nil); ErrorCode(err) != CodeNotFound {
		t.Fatalf("patch of a missing sandbox: %v", err)
	}
}

func TestAccessKeyIsPerSandboxAndPurpose(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	a, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	b, _ := m.Create(ctx, CreateRequest{Profile: "a"})
	ka, _ := m.AccessKey(a.ID, "p")
	ka2, _ := m.AccessKey(a.ID, "p")
	kb, _ := m.AccessKey(b.ID, "p")
	kq, _ := m.AccessKey(a.ID, "q")
	if ka == "" || ka != ka2 || ka == kb || ka == kq || len(ka) != 32 {
		t.Fatalf("keys a=%s a'=%s b=%s q=%s", ka, ka2, kb, kq)
	}
	_ = m.Delete(ctx, a.ID)
	if _, err := m.AccessKey(a.ID, "p"); ErrorCode(err) != CodeNotFound {
		t.Fatalf("key of a deleted sandbox: %v", err)
	}
}

func TestSandboxEgressNeedsAProxiedProfileAndIsKept(t *testing.T) {
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
	eg := &SandboxEgress{Deny: []string{"evil.example.com"}, AllowAnyName: true}
	if _, err := m.Create(ctx, CreateRequest{Profile: "open", Egress: eg}); ErrorCode(err) != CodeInvalid {
		t.Fatalf("egress on a bridge profile: %v", err)
	}
	sb, err := m.Create(ctx, CreateRequest{Profile: "proxied", Egress: eg})
	if err != nil {
		t.Fatal(err)
	}
	eg.Deny[0] = "changed"
	if sb.Egress == nil || sb.Egress.Deny[0] != "evil.example.com" || !sb.Egress.AllowAnyName {
		t.Fatalf("egress answered %+v", sb.Egress)
	}
	_ = m.Close()
	m2 := startTestManager(t, d, path, cfg)
	if g, err := m2.Get(ctx, sb.ID); err != nil || g.Egress == nil || g.Egress.Deny[0] != "evil.example.com" {
		t.Fatalf("after restart: %+v %v", g, err)
	}
}
