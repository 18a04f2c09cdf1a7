package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestExportFloodBounded is the attack of issue 33: an owner calls files:export again and again with the most
// paths and the longest paths a call accepts. Once its exports reach the per-owner bound the calls are refused
// with quota_exceeded and the store stops growing; another owner can still export; a path over the byte bound is
// refused before anything is stored. On the old code every call was stored (1,000 paths of ~32 KiB each).
func TestExportFloodBounded(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	dbPath := filepath.Join(t.TempDir(), "gw.db")
	st := sandboxes.NewBoltStore(dbPath)
	defer st.Close()
	svc.cfg.Exports = st
	alice := Principal{Owner: "alice"}

	long := strings.Repeat("d/", 2000) // 4000 bytes, under MaxExportPathBytes
	var refused error
	for call := range 10 {
		paths := make([]string, MaxExportPaths)
		for i := range paths {
			paths[i] = fmt.Sprintf("%s%d-%d", long, call, i)
		}
		if _, err := svc.ExportFiles(ctx, alice, b.id("sb-alice"), paths); err != nil {
			refused = err
			break
		}
	}
	e := AsError(refused)
	if e.Code != CodeQuotaExceeded || e.Details["scope"] != "export_bytes" {
		t.Fatalf("ten calls of 1,000 long paths: %v (%+v)", refused, e.Details)
	}
	fi, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<20 {
		t.Errorf("the store grew to %d bytes", fi.Size())
	}
	// The count bound, on a store with a small one.
	svc.cfg.ExportLimits = sandboxes.ExportLimits{MaxPerOwner: 3}
	if _, err := svc.ExportFiles(ctx, Principal{Owner: "bob"}, b.id("sb-bob"), []string{"a", "b", "c", "d"}); AsError(err).Code != CodeQuotaExceeded || AsError(err).Details["scope"] != "export_count" {
		t.Errorf("four paths over a bound of three: %v", err)
	}
	if _, err := svc.ExportFiles(ctx, Principal{Owner: "bob"}, b.id("sb-bob"), []string{"a", "b", "a", "c"}); err != nil {
		t.Errorf("three distinct paths (one named twice) within a bound of three: %v", err)
	}
	if _, err := svc.ExportFiles(ctx, Principal{Owner: "bob"}, b.id("sb-bob"), []string{"a", "b"}); err != nil {
		t.Errorf("renewing exported paths does not add to the count: %v", err)
	}
	// One path over the byte bound.
	if _, err := svc.ExportFiles(ctx, alice, b.id("sb-alice2"), []string{strings.Repeat("x", sandboxes.MaxExportPathBytes+1)}); AsError(err).Code != CodeValidation {
		t.Errorf("a path over %d bytes: %v", sandboxes.MaxExportPathBytes, err)
	}
}

// TestExportExpires: an export past its TTL is neither listed nor importable, and exporting again renews it.
func TestExportExpires(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	st := sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "gw.db"))
	defer st.Close()
	svc.cfg.Exports = st
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc.cfg.Now = func() time.Time { return now }
	alice := Principal{Owner: "alice"}
	if _, err := svc.ExportFiles(ctx, alice, b.id("sb-alice"), []string{"notes.txt"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(sandboxes.DefaultExportTTL)
	if es, err := svc.ListExports(ctx, alice, b.id("sb-alice")); err != nil || len(es) != 0 {
		t.Errorf("expired exports listed: %v %v", es, err)
	}
	if _, err := svc.ImportFile(ctx, alice, b.id("sb-alice2"), ImportParams{FromSandbox: b.id("sb-alice"), Path: "notes.txt"}); AsError(err).Code != CodeForbidden {
		t.Errorf("importing an expired export: %v", err)
	}
	if _, err := svc.ExportFiles(ctx, alice, b.id("sb-alice"), []string{"notes.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ImportFile(ctx, alice, b.id("sb-alice2"), ImportParams{FromSandbox: b.id("sb-alice"), Path: "notes.txt"}); err != nil {
		t.Errorf("importing a renewed export: %v", err)
	}
}

// TestExportTTLConfigured: Config.ExportLimits.TTL replaces the 7-day default; the answer says when the export
// expires, and past that it is neither listed nor importable.
func TestExportTTLConfigured(t *testing.T) {
	ctx := context.Background()
	svc, b, _ := newTestService(t)
	st := sandboxes.NewBoltStore(filepath.Join(t.TempDir(), "gw.db"))
	defer st.Close()
	svc.cfg.Exports = st
	svc.cfg.ExportLimits = sandboxes.ExportLimits{TTL: 2 * time.Hour}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc.cfg.Now = func() time.Time { return now }
	alice := Principal{Owner: "alice"}
	es, err := svc.ExportFiles(ctx, alice, b.id("sb-alice"), []string{"notes.txt"})
	if err != nil || len(es) != 1 || !es[0].ExpiresAt.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("export under a 2h TTL: %+v %v", es, err)
	}
	now = now.Add(2*time.Hour - time.Second)
	if es, err := svc.ListExports(ctx, alice, b.id("sb-alice")); err != nil || len(es) != 1 {
		t.Errorf("a live export not listed: %v %v", es, err)
	}
	now = now.Add(time.Second)
	if es, err := svc.ListExports(ctx, alice, b.id("sb-alice")); err != nil || len(es) != 0 {
		t.Errorf("an export past its 2h TTL listed: %v %v", es, err)
	}
	if _, err := svc.ImportFile(ctx, alice, b.id("sb-alice2"), ImportParams{FromSandbox: b.id("sb-alice"), Path: "notes.txt"}); AsError(err).Code != CodeForbidden {
		t.Errorf("importing an export past its TTL: %v", err)
	}
}
