package main_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

func readAll(t *testing.T, d *agentapi.Download) string {
	t.Helper()
	defer d.Body.Close()
	b, err := io.ReadAll(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFiles drives downloads, atomic uploads, multipart, path confinement and the fs helpers.
func TestFiles(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"filesystem"}})
	c := clientFor(sb)
	ctx := testCtx(t)

	t.Run("upload, download, range, etag", func(t *testing.T) {
		w, err := c.Upload(ctx, "dir/sub/hello.txt", strings.NewReader("hello, world"), agentapi.UploadOptions{Mode: "0600"})
		if err != nil || w.Size != 12 || w.Path != "dir/sub/hello.txt" || w.ETag == "" {
			t.Fatalf("%+v %v", w, err)
		}
		if mode := sb.Exec(t, "stat", "-c", "%a", "/workspace/dir/sub/hello.txt"); strings.TrimSpace(mode) != "600" {
			t.Fatalf("mode %s", mode)
		}
		d, err := c.Download(ctx, "dir/sub/hello.txt", agentapi.DownloadOptions{})
		if err != nil || d.ETag != w.ETag || readAll(t, d) != "hello, world" {
			t.Fatalf("%+v %v", d, err)
		}
		d, err = c.Download(ctx, "/workspace/dir/sub/hello.txt", agentapi.DownloadOptions{Range: "bytes=7-11"})
		if err != nil || d.Status != http.StatusPartialContent || d.ContentRange != "bytes 7-11/12" || readAll(t, d) != "world" {
			t.Fatalf("range: %+v %v", d, err)
		}
		d, err = c.Download(ctx, "dir/sub/hello.txt", agentapi.DownloadOptions{IfNoneMatch: w.ETag})
		if err != nil || !d.NotModified() {
			t.Fatalf("if-none-match: %+v %v", d, err)
		}
		d.Body.Close()
		_, err = c.Download(ctx, "dir/missing", agentapi.DownloadOptions{})
		wantCode(t, err, agentapi.CodeFileNotFound, http.StatusNotFound)
		_, err = c.Download(ctx, "dir", agentapi.DownloadOptions{})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)
	})

	t.Run("If-Match guards concurrent edits", func(t *testing.T) {
		first, err := c.Upload(ctx, "guarded.txt", strings.NewReader("v1"), agentapi.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		second, err := c.Upload(ctx, "guarded.txt", strings.NewReader("v2"), agentapi.UploadOptions{IfMatch: first.ETag})
		if err != nil || second.ETag == first.ETag {
			t.Fatalf("%+v %v", second, err)
		}
		_, err = c.Upload(ctx, "guarded.txt", strings.NewReader("stale"), agentapi.UploadOptions{IfMatch: first.ETag})
		e := wantCode(t, err, agentapi.CodePreconditionFail, http.StatusPreconditionFailed)
		if e.Details["etag"] != second.ETag {
			t.Fatalf("details %v", e.Details)
		}
		_, err = c.FSWrite(ctx, agentapi.WriteRequest{Path: "guarded.txt", Content: "stale", IfMatch: first.ETag})
		wantCode(t, err, agentapi.CodePreconditionFail, http.StatusPreconditionFailed)
		_, err = c.Upload(ctx, "never-existed.txt", strings.NewReader("x"), agentapi.UploadOptions{IfMatch: "*"})
		wantCode(t, err, agentapi.CodePreconditionFail, http.StatusPreconditionFailed)
		_, err = c.Upload(ctx, "dir", strings.NewReader("x"), agentapi.UploadOptions{})
		wantCode(t, err, agentapi.CodeConflict, http.StatusConflict)
		if got := sb.Exec(t, "cat", "/workspace/guarded.txt"); got != "v2" {
			t.Fatalf("content %q", got)
		}
	})

	t.Run("writes are atomic", func(t *testing.T) {
		if _, err := c.Upload(ctx, "atomic.txt", strings.NewReader("old"), agentapi.UploadOptions{}); err != nil {
			t.Fatal(err)
		}
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := c.Upload(ctx, "atomic.txt", pr, agentapi.UploadOptions{})
			done <- err
		}()
		pw.Write([]byte("new-part-1 "))
		time.Sleep(300 * time.Millisecond)
		// mid-upload, readers still see the old version, whole
		d, err := c.Download(ctx, "atomic.txt", agentapi.DownloadOptions{})
		if err != nil || readAll(t, d) != "old" {
			t.Fatalf("mid-upload read: %v", err)
		}
		pw.Write([]byte("new-part-2"))
		pw.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		d, err = c.Download(ctx, "atomic.txt", agentapi.DownloadOptions{})
		if err != nil || readAll(t, d) != "new-part-1 new-part-2" {
			t.Fatalf("after upload: %v", err)
		}
		// an aborted upload leaves the old file and no temporary file behind
		pr2, pw2 := io.Pipe()
		go func() {
			pw2.Write([]byte("partial"))
			time.Sleep(200 * time.Millisecond)
			pw2.CloseWithError(fmt.Errorf("client gave up"))
		}()
		if _, err := c.Upload(ctx, "atomic.txt", pr2, agentapi.UploadOptions{}); err == nil {
			t.Fatal("aborted upload succeeded")
		}
		// The agent removes the temporary file when its handler sees the body fail, which may be a moment after the
		// client gave up: wait for that rather than a guessed time.
		for deadline := time.Now().Add(testenv.WaitLimit); ; {
			got := sb.Exec(t, "ls", "-A", "/workspace")
			if !strings.Contains(got, ".sandgate-write") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("temporary file left: %s", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := sb.Exec(t, "cat", "/workspace/atomic.txt"); got != "new-part-1 new-part-2" {
			t.Fatalf("content after abort %q", got)
		}
	})

	t.Run("empty files", func(t *testing.T) {
		w, err := c.FSWrite(ctx, agentapi.WriteRequest{Path: "empty/a.txt", Content: ""})
		if err != nil || w.Size != 0 {
			t.Fatalf("%+v %v", w, err)
		}
		w, err = c.Upload(ctx, "empty/b.txt", strings.NewReader(""), agentapi.UploadOptions{})
		if err != nil || w.Size != 0 {
			t.Fatalf("%+v %v", w, err)
		}
		fi, err := c.FSStat(ctx, "empty/b.txt")
		if err != nil || fi.Size != 0 || fi.IsDir {
			t.Fatalf("%+v %v", fi, err)
		}
	})

	t.Run("multipart upload streams several files", func(t *testing.T) {
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		big := bytes.Repeat([]byte("0123456789abcdef"), 512<<10) // 8 MiB, never held whole by the agent
		go func() {
			mw.WriteField(agentapi.UploadFieldPath, "up/one.txt")
			f, _ := mw.CreateFormFile(agentapi.UploadFieldFile, "ignored.txt")
			f.Write([]byte("first"))
			mw.WriteField(agentapi.UploadFieldPath, "up/big.bin")
			f, _ = mw.CreateFormFile(agentapi.UploadFieldFile, "big.bin")
			f.Write(big)
			f, _ = mw.CreateFormFile(agentapi.UploadFieldFile, "named.txt") // no path field: ?path= dir + file name
			f.Write([]byte("third"))
			mw.Close()
			pw.Close()
		}()
		req, _ := c.NewRequest(ctx, http.MethodPost, "/v1/files/upload?path=up/dir", pr)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for path, want := range map[string]string{"/workspace/up/one.txt": "5", "/workspace/up/big.bin": fmt.Sprint(len(big)), "/workspace/up/dir/named.txt": "5"} {
			if got := strings.TrimSpace(sb.Exec(t, "stat", "-c", "%s", path)); got != want {
				t.Fatalf("%s: size %s, want %s", path, got, want)
			}
		}
	})

	t.Run("paths outside the workspace are refused", func(t *testing.T) {
		sb.Exec(t, "ln", "-sfn", "/etc", "/workspace/etc-link")
		sb.Exec(t, "ln", "-sfn", "../home", "/workspace/rel-escape")
		for _, p := range []string{"../etc/passwd", "dir/../../etc/passwd", "/etc/passwd", "/workspacex/a", "a\x00b", "etc-link/passwd", "rel-escape/sandbox/x"} {
			_, err := c.Download(ctx, p, agentapi.DownloadOptions{})
			wantCode(t, err, agentapi.CodeInvalidPath, http.StatusBadRequest)
			_, err = c.Upload(ctx, p, strings.NewReader("x"), agentapi.UploadOptions{})
			wantCode(t, err, agentapi.CodeInvalidPath, http.StatusBadRequest)
			_, err = c.FSStat(ctx, p)
			wantCode(t, err, agentapi.CodeInvalidPath, http.StatusBadRequest)
		}
		// the raw query form too (NUL percent-encoded)
		req, _ := c.NewRequest(ctx, http.MethodGet, "/v1/files?path="+url.QueryEscape("ok\x00/../../etc/passwd"), nil)
		_, err := c.Do(req)
		wantCode(t, err, agentapi.CodeInvalidPath, http.StatusBadRequest)
		// removing the link removes the link, not /etc
		if err := c.FSRemove(ctx, agentapi.RemoveRequest{Path: "etc-link"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fs helpers", func(t *testing.T) {
		if err := c.FSMkdir(ctx, agentapi.MkdirRequest{Path: "proj/src/pkg"}); err != nil {
			t.Fatal(err)
		}
		var lines strings.Builder
		for i := 1; i <= 30; i++ {
			fmt.Fprintf(&lines, "line %d\n", i)
		}
		noErr(t)(c.FSWrite(ctx, agentapi.WriteRequest{Path: "proj/src/pkg/a.go", Content: "package pkg\n\nfunc A() int { return 1 }\n"}))
		noErr(t)(c.FSWrite(ctx, agentapi.WriteRequest{Path: "proj/src/b.go", Content: "package src\n// A() twice: A()\n"}))
		noErr(t)(c.FSWrite(ctx, agentapi.WriteRequest{Path: "proj/lines.txt", Content: lines.String()}))
		noErr(t)(c.FSWrite(ctx, agentapi.WriteRequest{Path: "proj/bin.dat", Content: "AAEC", Encoding: agentapi.EncodingBase64}))

		list, err := c.FSList(ctx, agentapi.ListRequest{Path: "proj", Depth: 2})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range list.Entries {
			names = append(names, e.Path)
		}
		if strings.Join(names, ",") != "proj/bin.dat,proj/lines.txt,proj/src,proj/src/b.go,proj/src/pkg" {
			t.Fatalf("list: %v", names)
		}

		rd, err := c.FSRead(ctx, agentapi.ReadRequest{Path: "proj/lines.txt", Offset: 10, Limit: 5})
		if err != nil || rd.Content != "line 10\nline 11\nline 12\nline 13\nline 14\n" || !rd.Truncated || rd.TotalLines != 30 ||
			!strings.Contains(rd.Hint, "offset=15") {
			t.Fatalf("read: %+v %v", rd, err)
		}
		_, err = c.FSRead(ctx, agentapi.ReadRequest{Path: "proj/bin.dat"})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)

		_, err = c.FSEdit(ctx, agentapi.EditRequest{Path: "proj/src/b.go", Old: "A()", New: "B()"})
		e := wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)
		if e.Details["occurrences"] != float64(2) {
			t.Fatalf("ambiguous edit details %v", e.Details)
		}
		_, err = c.FSEdit(ctx, agentapi.EditRequest{Path: "proj/src/b.go", Old: "missing", New: "x"})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)
		ed, err := c.FSEdit(ctx, agentapi.EditRequest{Path: "proj/src/b.go", Old: "A()", New: "B()", ReplaceAll: true})
		if err != nil || ed.Replacements != 2 {
			t.Fatalf("edit: %+v %v", ed, err)
		}
		ed, err = c.FSEdit(ctx, agentapi.EditRequest{Path: "proj/src/pkg/a.go", Old: "return 1", New: "return 2"})
		if err != nil || ed.Replacements != 1 || sb.Exec(t, "grep", "-c", "return 2", "/workspace/proj/src/pkg/a.go") != "1\n" {
			t.Fatalf("edit: %+v %v", ed, err)
		}

		g, err := c.FSGlob(ctx, agentapi.GlobRequest{Pattern: "**/*.go", Path: "proj"})
		if err != nil || strings.Join(g.Paths, ",") != "proj/src/b.go,proj/src/pkg/a.go" {
			t.Fatalf("glob: %+v %v", g, err)
		}
		g, err = c.FSGlob(ctx, agentapi.GlobRequest{Pattern: "src/*.go", Path: "proj"})
		if err != nil || strings.Join(g.Paths, ",") != "proj/src/b.go" {
			t.Fatalf("glob: %+v %v", g, err)
		}

		gr, err := c.FSGrep(ctx, agentapi.GrepRequest{Pattern: `func \w+\(`, Path: "proj"})
		if err != nil || len(gr.Matches) != 1 || gr.Matches[0].Path != "proj/src/pkg/a.go" || gr.Matches[0].Line != 3 {
			t.Fatalf("grep: %+v %v", gr, err)
		}
		gr, err = c.FSGrep(ctx, agentapi.GrepRequest{Pattern: "nothing-matches-this"})
		if err != nil || len(gr.Matches) != 0 {
			t.Fatalf("grep none: %+v %v", gr, err)
		}
		_, err = c.FSGrep(ctx, agentapi.GrepRequest{Pattern: "(unclosed"})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)

		if err := c.FSCopy(ctx, agentapi.MoveRequest{From: "proj/src", To: "copy/src"}); err != nil {
			t.Fatal(err)
		}
		err = c.FSCopy(ctx, agentapi.MoveRequest{From: "proj/src", To: "copy/src"})
		wantCode(t, err, agentapi.CodeConflict, http.StatusConflict)
		if err := c.FSMove(ctx, agentapi.MoveRequest{From: "copy/src/b.go", To: "moved/b.go"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.FSStat(ctx, "copy/src/b.go"); err == nil {
			t.Fatal("moved file still at its source")
		}
		err = c.FSRemove(ctx, agentapi.RemoveRequest{Path: "copy"})
		wantCode(t, err, agentapi.CodeConflict, http.StatusConflict)
		if err := c.FSRemove(ctx, agentapi.RemoveRequest{Path: "copy", Recursive: true}); err != nil {
			t.Fatal(err)
		}
		err = c.FSRemove(ctx, agentapi.RemoveRequest{Path: "."})
		wantCode(t, err, agentapi.CodeInvalidPath, http.StatusBadRequest)
	})
}

func noErr(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestFilesLimits: a per-file size cap answers 413, a full workspace 507, and neither leaves anything behind.
func TestFilesLimits(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{
		NoWorkspaceVolume: true,
		Args:              []string{"--tmpfs", "/workspace:rw,size=2m,uid=65532,gid=65532"},
		Env:               []string{agentapi.EnvMaxFileBytes + "=1048576"},
	})
	c := clientFor(sb)
	ctx := testCtx(t)

	// a declared length over the cap is refused before the body is read
	_, err := c.Upload(ctx, "huge.bin", bytes.NewReader(make([]byte, 2<<20)), agentapi.UploadOptions{Size: 2 << 20})
	wantCode(t, err, agentapi.CodeTooLarge, http.StatusRequestEntityTooLarge)
	// without a length the cap is enforced while streaming
	_, err = c.Upload(ctx, "huge.bin", io.LimitReader(zeroReader{}, 1536<<10), agentapi.UploadOptions{})
	wantCode(t, err, agentapi.CodeTooLarge, http.StatusRequestEntityTooLarge)

	// files under the cap until the 2 MiB workspace is full
	for _, name := range []string{"a.bin", "b.bin"} {
		if _, err := c.Upload(ctx, name, bytes.NewReader(make([]byte, 800<<10)), agentapi.UploadOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Upload(ctx, "c.bin", bytes.NewReader(make([]byte, 800<<10)), agentapi.UploadOptions{})
	wantCode(t, err, agentapi.CodeNoSpace, http.StatusInsufficientStorage)
	_, err = c.FSWrite(ctx, agentapi.WriteRequest{Path: "d.txt", Content: strings.Repeat("x", 800<<10)})
	wantCode(t, err, agentapi.CodeNoSpace, http.StatusInsufficientStorage)

	if got := strings.Fields(sb.Exec(t, "ls", "-A", "/workspace")); strings.Join(got, ",") != "a.bin,b.bin" {
		t.Fatalf("refused uploads left files behind: %q", got)
	}
	if err := c.FSRemove(ctx, agentapi.RemoveRequest{Path: "b.bin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, "c.bin", bytes.NewReader(make([]byte, 800<<10)), agentapi.UploadOptions{}); err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
