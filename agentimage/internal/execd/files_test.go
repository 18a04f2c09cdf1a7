package execd_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestUploadDownload(t *testing.T) {
	e := newEnv(t)
	lines := "one\r\ntwo\n\nfour\r\r\nfive"
	status, body := e.upload(agentapi.ExecdFileMetadata{Path: filepath.Join(e.workspace, "d/f.txt"), ExecdPermission: agentapi.ExecdPermission{Mode: 600}}, lines)
	if status != http.StatusOK || len(body) != 0 {
		t.Fatalf("upload %d %s", status, body)
	}
	fi, err := os.Stat(filepath.Join(e.workspace, "d/f.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("uploaded file: %v %v", fi, err)
	}
	// package mirrors land in HOME, named with a tilde or absolutely
	if status, body := e.upload(agentapi.ExecdFileMetadata{Path: "~/.npmrc"}, "registry=http://mirror\n"); status != http.StatusOK {
		t.Fatalf("upload to home %d %s", status, body)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, ".npmrc")); err != nil || string(b) != "registry=http://mirror\n" {
		t.Fatalf("home file %q %v", b, err)
	}

	cases := []struct {
		name, query, rangeHdr string
		status                int
		body                  string
	}{
		{"whole", q("path", "d/f.txt"), "", 200, lines},
		{"range", q("path", filepath.Join(e.workspace, "d/f.txt")), "bytes=5-7", 206, "two"},
		{"lines from 2, 3 of them", q("path", "d/f.txt", "offset", "2", "limit", "3"), "", 200, "two\n\nfour"},
		{"lines to the end", q("path", "d/f.txt", "offset", "4"), "", 200, "four\nfive"},
		{"first line", q("path", "d/f.txt", "limit", "1"), "", 200, "one"},
		{"past the end", q("path", "d/f.txt", "offset", "99"), "", 200, ""},
		{"home file", q("path", "~/.npmrc"), "", 200, "registry=http://mirror\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.rangeHdr != "" {
				h.Set("Range", tc.rangeHdr)
			}
			status, _, body := e.do(http.MethodGet, "/files/download"+tc.query, nil, h)
			if status != tc.status || string(body) != tc.body {
				t.Fatalf("got %d %q, want %d %q", status, body, tc.status, tc.body)
			}
		})
	}

	refusals := []struct {
		name, query, rangeHdr string
		status                int
		code                  string
	}{
		{"no path", "", "", 400, agentapi.ExecdCodeMissingQuery},
		{"missing file", q("path", "nope"), "", 404, agentapi.ExecdCodeFileNotFound},
		{"outside", q("path", "/etc/passwd"), "", 403, agentapi.ExecdCodePathNotAllowed},
		{"escape by dots", q("path", "../../../../etc/passwd"), "", 403, agentapi.ExecdCodePathNotAllowed},
		{"lines and range", q("path", "d/f.txt", "offset", "1"), "bytes=0-1", 400, agentapi.ExecdCodeInvalidRequest},
		{"offset zero", q("path", "d/f.txt", "offset", "0"), "", 400, agentapi.ExecdCodeInvalidRequest},
		{"limit not a number", q("path", "d/f.txt", "limit", "x"), "", 400, agentapi.ExecdCodeInvalidRequest},
		{"a directory", q("path", "d"), "", 400, agentapi.ExecdCodeInvalidRequest},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.rangeHdr != "" {
				h.Set("Range", tc.rangeHdr)
			}
			status, _, body := e.do(http.MethodGet, "/files/download"+tc.query, nil, h)
			wantError(t, status, body, tc.status, tc.code)
		})
	}
}

func TestUploadRefusals(t *testing.T) {
	e := newEnv(t)
	if err := os.Symlink("/etc", filepath.Join(e.workspace, "etc-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/tmp", filepath.Join(e.home, "up")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		parts  [][2]string // form name, content
		status int
		code   string
	}{
		{"file without metadata", [][2]string{{"file", "x"}}, 400, agentapi.ExecdCodeInvalidFileMetadata},
		{"metadata without file", [][2]string{{"metadata", `{"path":"a"}`}}, 400, agentapi.ExecdCodeInvalidFileContent},
		{"metadata not json", [][2]string{{"metadata", `{`}, {"file", "x"}}, 400, agentapi.ExecdCodeInvalidFileMetadata},
		{"metadata without path", [][2]string{{"metadata", `{"mode":644}`}, {"file", "x"}}, 400, agentapi.ExecdCodeInvalidFileMetadata},
		{"mode not octal", [][2]string{{"metadata", `{"path":"a","mode":999}`}, {"file", "x"}}, 400, agentapi.ExecdCodeInvalidFileMetadata},
		{"two metadata in a row", [][2]string{{"metadata", `{"path":"a"}`}, {"metadata", `{"path":"b"}`}}, 400, agentapi.ExecdCodeInvalidFile},
		{"outside", [][2]string{{"metadata", `{"path":"/etc/evil"}`}, {"file", "x"}}, 403, agentapi.ExecdCodePathNotAllowed},
		{"through a symlink", [][2]string{{"metadata", `{"path":"etc-link/evil"}`}, {"file", "x"}}, 403, agentapi.ExecdCodePathNotAllowed},
		{"over the size cap", [][2]string{{"metadata", `{"path":"big"}`}, {"file", strings.Repeat("x", 1<<20+1)}}, 413, agentapi.ExecdCodeInvalidFileContent},
		{"nothing", nil, 400, agentapi.ExecdCodeInvalidFileMetadata},
		{"huge metadata", [][2]string{{"metadata", `{"path":"` + strings.Repeat("a", 70<<10) + `"}`}, {"file", "x"}}, 400, agentapi.ExecdCodeInvalidFileMetadata},
		{"home symlink out", [][2]string{{"metadata", `{"path":"~/up/evil"}`}, {"file", "x"}}, 403, agentapi.ExecdCodePathNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			for _, p := range tc.parts {
				sb.WriteString("--B\r\nContent-Disposition: form-data; name=\"" + p[0] + "\"; filename=\"" + p[0] + "\"\r\n\r\n" + p[1] + "\r\n")
			}
			sb.WriteString("--B--\r\n")
			status, _, body := e.do(http.MethodPost, "/files/upload", strings.NewReader(sb.String()), http.Header{"Content-Type": {"multipart/form-data; boundary=B"}})
			wantError(t, status, body, tc.status, tc.code)
		})
	}
	status, _, body := e.do(http.MethodPost, "/files/upload", strings.NewReader("x"), http.Header{"Content-Type": {"text/plain"}})
	wantError(t, status, body, 400, agentapi.ExecdCodeInvalidFile)
	if _, err := os.Stat("/etc/evil"); err == nil {
		t.Fatal("wrote outside")
	}
}

func TestFileOperations(t *testing.T) {
	e := newEnv(t)
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(e.workspace, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "hello hello")
	write("src/b.go", "package b")
	write("src/deep/c.go", "package c")
	write("src/deep/d.md", "# d")

	t.Run("info", func(t *testing.T) {
		status, body := e.json(http.MethodGet, "/files/info"+q("path", "a.txt", "path", e.workspace+"/src"), nil)
		var got map[string]agentapi.ExecdFileInfo
		if err := json.Unmarshal(body, &got); err != nil || status != 200 || len(got) != 2 {
			t.Fatalf("%d %s", status, body)
		}
		a := got["a.txt"]
		if a.Path != filepath.Join(e.workspace, "a.txt") || a.Type != "file" || a.Size != 11 || a.Mode != 644 || a.Owner == "" || a.ModifiedAt.IsZero() {
			t.Fatalf("a.txt %+v", a)
		}
		if got[e.workspace+"/src"].Type != "directory" {
			t.Fatalf("src %+v", got[e.workspace+"/src"])
		}
		status, body = e.json(http.MethodGet, "/files/info"+q("path", "a.txt", "path", "missing"), nil)
		wantError(t, status, body, 404, agentapi.ExecdCodeFileNotFound)
		status, body = e.json(http.MethodGet, "/files/info"+q("path", "/etc/passwd"), nil)
		wantError(t, status, body, 403, agentapi.ExecdCodePathNotAllowed)
	})

	t.Run("search", func(t *testing.T) {
		cases := []struct {
			pattern string
			want    []string
		}{
			{"*.go", []string{"src/b.go", "src/deep/c.go"}},
			{"", []string{"src/b.go", "src/deep/c.go", "src/deep/d.md"}},
			{"{c,d}.*", []string{"src/deep/c.go", "src/deep/d.md"}},
			{"nothing*", []string{}},
		}
		for _, tc := range cases {
			status, body := e.json(http.MethodGet, "/files/search"+q("path", "src", "pattern", tc.pattern), nil)
			var got []agentapi.ExecdFileInfo
			if err := json.Unmarshal(body, &got); err != nil || status != 200 {
				t.Fatalf("%q: %d %s", tc.pattern, status, body)
			}
			paths := []string{}
			for _, f := range got {
				paths = append(paths, strings.TrimPrefix(f.Path, e.workspace+"/"))
			}
			slices.Sort(paths)
			if !slices.Equal(paths, tc.want) {
				t.Fatalf("%q: %v, want %v", tc.pattern, paths, tc.want)
			}
		}
		status, body := e.json(http.MethodGet, "/files/search"+q("path", "src", "pattern", "[a-"), nil)
		wantError(t, status, body, 400, agentapi.ExecdCodeInvalidRequest)
		status, body = e.json(http.MethodGet, "/files/search"+q("pattern", "*"), nil)
		wantError(t, status, body, 400, agentapi.ExecdCodeMissingQuery)
		status, body = e.json(http.MethodGet, "/files/search"+q("path", "/", "pattern", "passwd"), nil)
		wantError(t, status, body, 403, agentapi.ExecdCodePathNotAllowed)
	})

	t.Run("replace", func(t *testing.T) {
		status, body := e.json(http.MethodPost, "/files/replace?verbose=true", map[string]agentapi.ExecdReplaceItem{"a.txt": {Old: "hello", New: "bye"}})
		if status != 200 || string(body) != `{"a.txt":{"replacedCount":2}}`+"\n" {
			t.Fatalf("%d %s", status, body)
		}
		if b, _ := os.ReadFile(filepath.Join(e.workspace, "a.txt")); string(b) != "bye bye" {
			t.Fatalf("content %q", b)
		}
		status, body = e.json(http.MethodPost, "/files/replace", map[string]agentapi.ExecdReplaceItem{"a.txt": {Old: "", New: "x"}})
		wantError(t, status, body, 400, agentapi.ExecdCodeInvalidRequest)
		status, body = e.json(http.MethodPost, "/files/replace", map[string]agentapi.ExecdReplaceItem{"nope": {Old: "a", New: "x"}})
		wantError(t, status, body, 404, agentapi.ExecdCodeFileNotFound)
	})

	t.Run("permissions", func(t *testing.T) {
		status, body := e.json(http.MethodPost, "/files/permissions", map[string]agentapi.ExecdPermission{"a.txt": {Mode: 640}})
		if fi, _ := os.Stat(filepath.Join(e.workspace, "a.txt")); status != 200 || fi.Mode().Perm() != 0o640 {
			t.Fatalf("%d %s %v", status, body, fi.Mode())
		}
		status, body = e.json(http.MethodPost, "/files/permissions", map[string]agentapi.ExecdPermission{"a.txt": {Mode: 8}})
		wantError(t, status, body, 400, agentapi.ExecdCodeInvalidRequest)
		status, body = e.json(http.MethodPost, "/files/permissions", map[string]agentapi.ExecdPermission{"/etc/passwd": {Mode: 777}})
		wantError(t, status, body, 403, agentapi.ExecdCodePathNotAllowed)
	})

	t.Run("move", func(t *testing.T) {
		status, body := e.json(http.MethodPost, "/files/mv", []agentapi.ExecdRenameItem{{Src: "a.txt", Dest: "moved/a.txt"}, {Src: "moved/a.txt", Dest: "~/a.txt"}})
		if _, err := os.Stat(filepath.Join(e.home, "a.txt")); status != 200 || err != nil {
			t.Fatalf("%d %s %v", status, body, err)
		}
		write("x", "")
		write("y", "")
		status, body = e.json(http.MethodPost, "/files/mv", []agentapi.ExecdRenameItem{{Src: "x", Dest: "y"}})
		wantError(t, status, body, 409, agentapi.ExecdCodeRuntimeError)
		status, body = e.json(http.MethodPost, "/files/mv", []agentapi.ExecdRenameItem{{Src: "nope", Dest: "z"}})
		wantError(t, status, body, 404, agentapi.ExecdCodeFileNotFound)
		status, body = e.json(http.MethodPost, "/files/mv", []agentapi.ExecdRenameItem{{Src: "x", Dest: "/tmp/stolen"}})
		wantError(t, status, body, 403, agentapi.ExecdCodePathNotAllowed)
	})

	t.Run("delete", func(t *testing.T) {
		status, body := e.json(http.MethodDelete, "/files"+q("path", "x", "path", "never-was"), nil)
		if _, err := os.Stat(filepath.Join(e.workspace, "x")); status != 200 || err == nil {
			t.Fatalf("%d %s", status, body)
		}
		status, body = e.json(http.MethodDelete, "/files"+q("path", "src"), nil)
		wantError(t, status, body, 400, agentapi.ExecdCodeInvalidRequest)
		status, body = e.json(http.MethodDelete, "/files"+q("path", "/etc/hostname"), nil)
		wantError(t, status, body, 403, agentapi.ExecdCodePathNotAllowed)
	})
}

func TestDirectories(t *testing.T) {
	e := newEnv(t)
	status, body := e.json(http.MethodPost, "/directories", map[string]agentapi.ExecdPermission{"p/q/r": {Mode: 700}, "~/cache": {Mode: 755}})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if fi, err := os.Stat(filepath.Join(e.workspace, "p/q/r")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%v %v", fi, err)
	}
	if err := os.WriteFile(filepath.Join(e.workspace, "p/q/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(e.workspace, "p/link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		depth string
		want  []string
	}{
		{"", []string{"p/link", "p/q"}},
		{"1", []string{"p/link", "p/q"}},
		{"2", []string{"p/link", "p/q", "p/q/f", "p/q/r"}},
		{"9", []string{"p/link", "p/q", "p/q/f", "p/q/r"}},
		{"0", []string{}},
	}
	for _, tc := range cases {
		status, body := e.json(http.MethodGet, "/directories/list"+q("path", "p", "depth", tc.depth), nil)
		var got []agentapi.ExecdFileInfo
		if err := json.Unmarshal(body, &got); err != nil || status != 200 {
			t.Fatalf("depth %q: %d %s", tc.depth, status, body)
		}
		paths := []string{}
		for _, f := range got {
			paths = append(paths, strings.TrimPrefix(f.Path, e.workspace+"/"))
		}
		if !slices.Equal(paths, tc.want) {
			t.Fatalf("depth %q: %v, want %v", tc.depth, paths, tc.want)
		}
	}
	refusals := []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/directories/list" + q("depth", "1"), 400, agentapi.ExecdCodeMissingQuery},
		{"GET", "/directories/list" + q("path", "p", "depth", "-1"), 400, agentapi.ExecdCodeInvalidRequest},
		{"GET", "/directories/list" + q("path", "p/link"), 400, agentapi.ExecdCodeInvalidRequest},
		{"GET", "/directories/list" + q("path", "p/q/f"), 400, agentapi.ExecdCodeInvalidRequest},
		{"GET", "/directories/list" + q("path", "nope"), 404, agentapi.ExecdCodeFileNotFound},
		{"GET", "/directories/list" + q("path", "/etc"), 403, agentapi.ExecdCodePathNotAllowed},
		{"DELETE", "/directories" + q("path", e.workspace), 400, agentapi.ExecdCodeInvalidRequest},
		{"DELETE", "/directories" + q("path", "~"), 400, agentapi.ExecdCodeInvalidRequest},
		{"DELETE", "/directories" + q("path", "/usr"), 403, agentapi.ExecdCodePathNotAllowed},
	}
	for _, tc := range refusals {
		status, body := e.json(tc.method, tc.path, nil)
		wantError(t, status, body, tc.status, tc.code)
	}
	status, body = e.json(http.MethodPost, "/directories", map[string]agentapi.ExecdPermission{"/opt/x": {Mode: 755}})
	wantError(t, status, body, 403, agentapi.ExecdCodePathNotAllowed)

	status, body = e.json(http.MethodDelete, "/directories"+q("path", "p", "path", "never-was"), nil)
	if _, err := os.Stat(filepath.Join(e.workspace, "p")); status != 200 || err == nil {
		t.Fatalf("%d %s", status, body)
	}
	if _, err := os.Stat("/etc/hostname"); err != nil {
		t.Fatal("the symlink's target went with it")
	}
}
