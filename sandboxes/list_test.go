package sandboxes

import (
	"context"
	"testing"
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
