package sandboxes

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestListPagesNewestFirst(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	for i := range 5 {
		owner := "x"
		if i%2 == 0 {
			owner = "y"
		}
		if _, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	var all []*Sandbox
	cursor := ""
	for page := 0; ; page++ {
		items, next, err := m.List(ctx, ListOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, items...)
		if next == "" {
			break
		}
		cursor = next
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if len(all) != 5 {
		t.Fatalf("%d sandboxes over all pages", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Error("not newest first")
		}
	}
	if items, _, _ := m.List(ctx, ListOptions{Owner: "y"}); len(items) != 3 {
		t.Errorf("owner filter: %d", len(items))
	}
	if _, _, err := m.List(ctx, ListOptions{Cursor: "!!"}); ErrorCode(err) != CodeInvalid {
		t.Errorf("bad cursor: %v", err)
	}
}

// TestListPagesMatchOneSort: whatever the page size, the pages put together are every matching sandbox exactly once,
// in the order of one sort of all of them (newest first, ties on the creation time broken by id), and only the last
// page has no cursor.
func TestListPagesMatchOneSort(t *testing.T) {
	m, _, _ := newTestManager(t, Config{Profiles: []Profile{testProfile("a")}})
	ctx := context.Background()
	var ids []string
	for i := range 37 {
		sb, err := m.Create(ctx, CreateRequest{Profile: "a", Owner: []string{"x", "y", "z"}[i%3]})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	// Ties: groups of four share one creation time, so the id decides within them.
	base := time.Now().Add(-time.Hour)
	m.mu.Lock()
	for i, id := range ids {
		m.entries[id].rec.CreatedAt = base.Add(time.Duration(i/4) * time.Second)
	}
	m.mu.Unlock()
	want := func(owner string) []string {
		m.mu.RLock()
		defer m.mu.RUnlock()
		var out []*entry
		for _, id := range ids {
			if owner == "" || m.entries[id].rec.Owner == owner {
				out = append(out, m.entries[id])
			}
		}
		slices.SortFunc(out, newestFirst)
		var names []string
		for _, e := range out {
			names = append(names, e.rec.ID)
		}
		return names
	}
	for _, owner := range []string{"", "y"} {
		for _, limit := range []int{1, 2, 3, 5, 12, 13, 36, 37, 50} {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				items, next, err := m.List(ctx, ListOptions{Limit: limit, Cursor: cursor, Owner: owner})
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > limit || (next != "" && len(items) != limit) {
					t.Fatalf("owner %q limit %d: a page of %d items, next %q", owner, limit, len(items), next)
				}
				for _, sb := range items {
					got = append(got, sb.ID)
				}
				if next == "" {
					break
				}
				if pages > 40 {
					t.Fatalf("owner %q limit %d: pagination does not end", owner, limit)
				}
				cursor = next
			}
			if w := want(owner); !slices.Equal(got, w) {
				t.Errorf("owner %q limit %d:\n got  %v\n want %v", owner, limit, got, w)
			}
		}
	}
}
