package redisstore

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestStorageFiles walks certmagic's file semantics: Store/Load, Exists and Stat of files and directories, List one
// level and recursive, Delete of a file and of a directory, and fs.ErrNotExist for what is missing. A second client
// (another gateway) sees every write.
func TestStorageFiles(t *testing.T) {
	r := startRedis(t)
	a := NewStorage(client(t, r), "t:", 0)
	b := NewStorage(client(t, r), "t:", 0)
	ctx := context.Background()
	files := map[string]string{
		"certificates/acme/a.example/a.example.crt":  "CERT",
		"certificates/acme/a.example/a.example.key":  "KEY",
		"certificates/acme/a.example/a.example.json": "{}",
		"certificates/acme/b.example/b.example.crt":  "CERT-B",
		"acme/acct/users/x.json":                     "user",
		"last_clean.json":                            "clean",
		// A sibling whose name extends a directory's ("a.example" vs "a.example0") must not be listed inside it.
		"certificates/acme/a.example0": "neighbour",
	}
	for k, v := range files {
		if err := a.Store(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range files {
		got, err := b.Load(ctx, k)
		if err != nil || string(got) != v {
			t.Fatalf("load %s through B: %q, %v", k, got, err)
		}
	}
	// Keys are canonical, as paths of certmagic's FileStorage would be.
	if err := a.Store(ctx, "/odd//x/./y/../z/", []byte("odd")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Load(ctx, "odd/x/z"); err != nil || string(got) != "odd" {
		t.Fatalf("canonical key: %q %v", got, err)
	}
	if err := b.Delete(ctx, "odd"); err != nil || b.Exists(ctx, "odd/x/z") {
		t.Fatalf("delete of the canonical key's directory: %v", err)
	}
	if err := b.Delete(ctx, "../.."); err == nil {
		t.Fatal("deleted the root through ..")
	}
	if _, err := b.Load(ctx, "certificates/acme"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load of a directory: %v", err)
	}
	for _, k := range []string{"certificates", "certificates/acme/a.example", "last_clean.json", ""} {
		if !b.Exists(ctx, k) {
			t.Fatalf("%q does not exist", k)
		}
	}
	if b.Exists(ctx, "certificates/acme/c.example") || b.Exists(ctx, "certificates/acm") {
		t.Fatal("a missing key exists")
	}
	st, err := b.Stat(ctx, "certificates/acme/a.example/a.example.key")
	if err != nil || !st.IsTerminal || st.Size != 3 || time.Since(st.Modified) > time.Hour {
		t.Fatalf("stat of a file: %+v, %v", st, err)
	}
	if st, err := b.Stat(ctx, "certificates/acme"); err != nil || st.IsTerminal {
		t.Fatalf("stat of a directory: %+v, %v", st, err)
	}
	if _, err := b.Stat(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of nothing: %v", err)
	}

	list := func(dir string, rec bool) []string {
		t.Helper()
		got, err := b.List(ctx, dir, rec)
		if err != nil {
			t.Fatalf("list %q: %v", dir, err)
		}
		slices.Sort(got)
		return got
	}
	if got, want := list("certificates/acme", false), []string{"certificates/acme/a.example", "certificates/acme/a.example0", "certificates/acme/b.example"}; !slices.Equal(got, want) {
		t.Fatalf("list one level: %q, want %q", got, want)
	}
	if got, want := list("certificates/acme/a.example", false), []string{"certificates/acme/a.example/a.example.crt", "certificates/acme/a.example/a.example.json", "certificates/acme/a.example/a.example.key"}; !slices.Equal(got, want) {
		t.Fatalf("list of a.example: %q, want %q", got, want)
	}
	if got, want := list("", false), []string{"acme", "certificates", "last_clean.json"}; !slices.Equal(got, want) {
		t.Fatalf("list of the root: %q, want %q", got, want)
	}
	wantRec := []string{"certificates/acme", "certificates/acme/a.example", "certificates/acme/a.example/a.example.crt",
		"certificates/acme/a.example/a.example.json", "certificates/acme/a.example/a.example.key", "certificates/acme/a.example0",
		"certificates/acme/b.example", "certificates/acme/b.example/b.example.crt"}
	if got := list("certificates", true); !slices.Equal(got, wantRec) {
		t.Fatalf("recursive list: %q, want %q", got, wantRec)
	}
	if _, err := b.List(ctx, "certificates/zzz", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("list of nothing: %v", err)
	}

	// Overwrite, then delete a file, then a whole directory; deleting what is gone is no error.
	if err := b.Store(ctx, "last_clean.json", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Load(ctx, "last_clean.json"); string(got) != "again" {
		t.Fatalf("overwrite not seen: %q", got)
	}
	if err := a.Delete(ctx, "last_clean.json"); err != nil {
		t.Fatal(err)
	}
	if b.Exists(ctx, "last_clean.json") {
		t.Fatal("deleted file exists")
	}
	if err := a.Delete(ctx, "certificates/acme/a.example"); err != nil {
		t.Fatal(err)
	}
	if b.Exists(ctx, "certificates/acme/a.example") || b.Exists(ctx, "certificates/acme/a.example/a.example.key") {
		t.Fatal("deleted directory still exists")
	}
	if !b.Exists(ctx, "certificates/acme/a.example0") || !b.Exists(ctx, "certificates/acme/b.example/b.example.crt") {
		t.Fatal("deleting a directory took its neighbours")
	}
	if err := a.Delete(ctx, "certificates/acme/a.example"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
}

// TestStorageLock: a lock excludes another gateway until released; Unlock by a non-holder changes nothing; a held
// lock is refreshed; a holder that dies (stops refreshing) loses it after the TTL; Lock honours its context.
func TestStorageLock(t *testing.T) {
	r := startRedis(t)
	ca := client(t, r)
	a := NewStorage(ca, "t:", 1500*time.Millisecond)
	b := NewStorage(client(t, r), "t:", 1500*time.Millisecond)
	ctx := context.Background()
	if err := a.Lock(ctx, "issue_cert_x"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := b.Lock(short, "issue_cert_x")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B locked a held lock: %v", err)
	}
	if err := b.Unlock(ctx, "issue_cert_x"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("unlock by a non-holder: %v", err)
	}
	if n, _ := ca.Exists(ctx, "t:lock:issue_cert_x").Result(); n != 1 {
		t.Fatal("a non-holder's unlock released the lock")
	}
	// Refreshed while held: the TTL goes back up (observed, not timed).
	low, _ := ca.PTTL(ctx, "t:lock:issue_cert_x").Result()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		now, err := ca.PTTL(ctx, "t:lock:issue_cert_x").Result()
		if err != nil || now < 0 {
			t.Fatalf("lock gone while held: %v %v", now, err)
		}
		if now > low {
			break
		}
		low = now
		if time.Now().After(deadline) {
			t.Fatal("the lock was never refreshed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx, "issue_cert_x") }()
	if err := a.Unlock(ctx, "issue_cert_x"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B after A's unlock: %v", err)
	}
	// Closed, B still releases what it holds (Caddy cleans up locks after stopping its apps).
	b.Close()
	if err := b.Unlock(ctx, "issue_cert_x"); err != nil {
		t.Fatalf("unlock after close: %v", err)
	}
	if err := b.Lock(ctx, "issue_cert_x"); err != nil {
		t.Fatal(err)
	}
	// B dies holding it: its refresher stops, and the lock expires for A.
	b.Close()
	wait, cancel := context.WithTimeout(ctx, testenv.WaitLimit)
	defer cancel()
	if err := a.Lock(wait, "issue_cert_x"); err != nil {
		t.Fatalf("A after B died: %v", err)
	}
	if err := b.Unlock(ctx, "issue_cert_x"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("dead B's unlock: %v", err)
	}
	if err := a.Unlock(ctx, "issue_cert_x"); err != nil {
		t.Fatal(err)
	}
}

// TestStorageRedisDown: every call fails with an error (Exists says false), none hangs.
func TestStorageRedisDown(t *testing.T) {
	r := startRedis(t)
	s := NewStorage(client(t, r), "t:", 0)
	r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitLimit)
	defer cancel()
	if err := s.Store(ctx, "k", []byte("v")); err == nil {
		t.Fatal("store with redis down")
	}
	if _, err := s.Load(ctx, "k"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load with redis down: %v (must not look like a missing key)", err)
	}
	if s.Exists(ctx, "k") {
		t.Fatal("exists with redis down")
	}
	if err := s.Lock(ctx, "l"); err == nil {
		t.Fatal("lock with redis down")
	}
}
