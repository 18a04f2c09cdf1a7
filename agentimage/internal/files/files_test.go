package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

func TestMatchSegments(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"*.go", "a.go", true},
		{"*.go", "dir/a.go", false},
		{"**/*.go", "a.go", true},
		{"**/*.go", "x/y/z/a.go", true},
		{"src/**", "src/a/b", true},
		{"src/**/test_*.py", "src/test_a.py", true},
		{"src/**/test_*.py", "src/x/y/test_a.py", true},
		{"src/**/test_*.py", "lib/test_a.py", false},
		{"?.txt", "ab.txt", false},
		{"[ab].txt", "b.txt", true},
	} {
		got := matchSegments(strings.Split(tc.pattern, "/"), strings.Split(tc.path, "/"))
		if got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func newService(t *testing.T, max int64) *Service {
	t.Helper()
	root, err := workspace.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return New(root, max)
}

func TestReadWindowsAndHints(t *testing.T) {
	s := newService(t, 0)
	ctx := context.Background()
	long := strings.Repeat("é", agentapi.MaxReadLineBytes) // 2 bytes per rune: must be cut on a rune boundary
	if _, err := s.Write(ctx, agentapi.WriteRequest{Path: "f.txt", Content: "one\ntwo\r\n" + long + "\nfour"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		offset, limit int
		content       string
		truncated     bool
		hint          string
	}{
		{"first two", 0, 2, "one\ntwo\n", true, "offset=3"},
		{"last line without newline", 4, 10, "four\n", false, ""},
		{"past the end", 9, 1, "", false, "only 4 lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Read(agentapi.ReadRequest{Path: "f.txt", Offset: tc.offset, Limit: tc.limit})
			if err != nil || res.Content != tc.content || res.Truncated != tc.truncated || !strings.Contains(res.Hint, tc.hint) || res.TotalLines != 4 {
				t.Fatalf("%+v %v", res, err)
			}
		})
	}
	res, err := s.Read(agentapi.ReadRequest{Path: "f.txt", Offset: 3, Limit: 1})
	if err != nil || !res.Truncated || !strings.Contains(res.Content, "[line cut]") || !strings.Contains(res.Hint, "cut") {
		t.Fatalf("long line: %+v %v", res, err)
	}
	if strings.ContainsRune(res.Content, '\uFFFD') {
		t.Fatal("long line cut inside a character")
	}
}

func TestWriteFileCapAndPreconditions(t *testing.T) {
	s := newService(t, 10)
	ctx := context.Background()
	w, err := s.WriteFile(ctx, "a/b/c.txt", strings.NewReader("0123456789"), WriteOptions{Size: -1})
	if err != nil || w.Size != 10 {
		t.Fatalf("%+v %v", w, err)
	}
	for _, tc := range []struct {
		name string
		body string
		opts WriteOptions
		code string
	}{
		{"over the cap while streaming", "0123456789x", WriteOptions{Size: -1}, agentapi.CodeTooLarge},
		{"declared over the cap", "", WriteOptions{Size: 11}, agentapi.CodeTooLarge},
		{"stale etag", "x", WriteOptions{IfMatch: `"nope"`}, agentapi.CodePreconditionFail},
		{"must not exist", "x", WriteOptions{IfNoneMatch: "*"}, agentapi.CodePreconditionFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.WriteFile(ctx, "a/b/c.txt", strings.NewReader(tc.body), tc.opts)
			var e *agentapi.Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("want %s, got %v", tc.code, err)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root().Dir(), "a/b/c.txt")); string(b) != "0123456789" {
		t.Fatalf("refused writes changed the file: %q", b)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Root().Dir(), "a/b"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if _, err := s.WriteFile(ctx, "a/b/c.txt", strings.NewReader("new"), WriteOptions{IfMatch: w.ETag}); err != nil {
		t.Fatalf("matching etag: %v", err)
	}
}
