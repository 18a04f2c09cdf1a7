package envd

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
)

// multipartBody builds what E2B's SDK sends: parts named "file" whose filename is the full destination path.
func multipartBody(t *testing.T, files map[string]string, extra ...string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	add := func(name, filename, data string) {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+name+`"; filename="`+filename+`"`)
		h.Set("Content-Type", "application/octet-stream")
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(data))
	}
	for p, data := range files {
		add("file", p, data)
	}
	for _, p := range extra {
		add("other", p, "ignored")
	}
	_ = mw.Close()
	return mw.FormDataContentType(), &buf
}

func restBody(t *testing.T, resp *http.Response) restError {
	t.Helper()
	var e restError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Code != resp.StatusCode {
		t.Fatalf("error body: %v %+v (status %d)", err, e, resp.StatusCode)
	}
	return e
}

func TestFilesUploadAndDownload(t *testing.T) {
	te := newTestEnvd(t)
	ct, body := multipartBody(t, map[string]string{"/home/user/one.txt": "1", "/home/user/dir/two.txt": "22", "rel.txt": "3"}, "/home/user/other.txt")
	req, _ := http.NewRequest(http.MethodPost, te.url+"/files", body)
	req.Header.Set("Content-Type", ct)
	resp := mustDo(t, req)
	var got []uploaded
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || len(got) != 3 {
		t.Fatalf("%d %v %+v", resp.StatusCode, err, got)
	}
	for _, u := range got {
		if u.Type != "file" || !strings.HasPrefix(u.Path, "/home/user/") {
			t.Fatalf("entry %+v", u)
		}
	}
	if b, _ := os.ReadFile(te.dir + "/dir/two.txt"); string(b) != "22" {
		t.Fatalf("two.txt %q", b)
	}
	if _, err := os.Stat(te.dir + "/other.txt"); err == nil {
		t.Fatal("a part not named file was written")
	}

	// one part with ?path= (which wins); octet-stream, gzip'd
	ct, body = multipartBody(t, map[string]string{"ignored-name": "via path"})
	req, _ = http.NewRequest(http.MethodPost, te.url+"/files?path=/home/user/p.txt", body)
	req.Header.Set("Content-Type", ct)
	if resp := mustDo(t, req); resp.StatusCode != 200 {
		t.Fatalf("path override: %d", resp.StatusCode)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte{0, 1, 2, 255}, 1000))
	_ = zw.Close()
	req, _ = http.NewRequest(http.MethodPost, te.url+"/files?path=/home/user/bin.dat&username=user", &gz)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	if resp := mustDo(t, req); resp.StatusCode != 200 {
		t.Fatalf("octet-stream: %d", resp.StatusCode)
	}

	for path, want := range map[string]string{"/home/user/p.txt": "via path", "bin.dat": string(bytes.Repeat([]byte{0, 1, 2, 255}, 1000))} {
		resp := mustDo(t, must(http.NewRequest(http.MethodGet, te.url+"/files?path="+path, nil)))
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("GET %s: %d %d bytes", path, resp.StatusCode, len(b))
		}
	}
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}

func TestFilesErrors(t *testing.T) {
	te := newTestEnvd(t)
	if err := os.Symlink(t.TempDir(), te.dir+"/escape"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, te.dir+"/../outside-secret", "secret")
	if err := os.Symlink(te.dir+"/../outside-secret", te.dir+"/secret-link"); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20+1)
	dupCT, dupBody := func() (string, *bytes.Buffer) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for range 2 {
			w, _ := mw.CreateFormFile("file", "/home/user/same.txt")
			_, _ = w.Write([]byte("x"))
		}
		_ = mw.Close()
		return mw.FormDataContentType(), &buf
	}()
	for _, tc := range []struct {
		name        string
		method, url string
		ct          string
		body        io.Reader
		want        int
	}{
		{"missing file", "GET", "/files?path=/home/user/nope", "", nil, 404},
		{"directory", "GET", "/files?path=/home/user", "", nil, 400},
		{"outside the workspace", "GET", "/files?path=/etc/passwd", "", nil, 403},
		{"root user", "GET", "/files?path=x&username=root", "", nil, 403},
		{"unknown user", "GET", "/files?path=x&username=alice", "", nil, 401},
		{"octet-stream without path", "POST", "/files", "application/octet-stream", strings.NewReader("x"), 400},
		{"over the file cap", "POST", "/files?path=big", "application/octet-stream", strings.NewReader(big), 507},
		{"other content type", "POST", "/files?path=x", "text/plain", strings.NewReader("x"), 400},
		{"same path twice", "POST", "/files", dupCT, dupBody, 400},
		{"upload outside", "POST", "/files?path=/etc/evil", "application/octet-stream", strings.NewReader("x"), 403},
		{"upload through a symlink out", "POST", "/files?path=/home/user/escape/evil", "application/octet-stream", strings.NewReader("x"), 403},
		{"download through a symlink out", "GET", "/files?path=/home/user/secret-link", "", nil, 403},
		{"download with ..", "GET", "/files?path=/home/user/../outside-secret", "", nil, 403},
		{"unknown route", "GET", "/nope", "", nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, te.url+tc.url, tc.body)
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp := mustDo(t, req)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			restBody(t, resp)
		})
	}
	if _, err := os.Stat(te.dir + "/big"); err == nil {
		t.Fatal("an upload over the cap left a file")
	}
}

func TestHealthAndEnvs(t *testing.T) {
	te := newTestEnvd(t)
	if resp := mustDo(t, must(http.NewRequest(http.MethodGet, te.url+"/health", nil))); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("health %d", resp.StatusCode)
	}
	req := must(http.NewRequest(http.MethodGet, te.url+"/envs", nil))
	req.Header.Set(agentapi.E2BEnvHeader, `{"FOO":"bar"}`)
	resp := mustDo(t, req)
	var env map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env["FOO"] != "bar" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("envs %v %v", err, env)
	}
}

// TestDesktopScreenshot: @e2b/desktop's screenshot file (/tmp/screenshot-<16 alphanumerics>.png) is the one path
// outside the workspace that files.read and files.remove reach. The attack: a symlink planted under that name
// (to a file outside, as to the agent's own /proc entries) is not followed; any other /tmp path stays refused.
func TestDesktopScreenshot(t *testing.T) {
	te := newTestEnvd(t)
	ctx := ctxFor(t)
	name := func() string {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return fmt.Sprintf("/tmp/screenshot-%x.png", b)
	}
	shot, link, dir := name(), name(), name()
	writeFile(t, shot, "\x89PNG shot")
	secret := filepath.Join(t.TempDir(), "secret")
	writeFile(t, secret, "secret")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(shot); os.Remove(link); os.Remove(dir) })

	get := func(p string) (int, string) {
		resp := mustDo(t, must(http.NewRequest("GET", te.url+"/files?path="+url.QueryEscape(p), nil)))
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(shot); code != 200 || body != "\x89PNG shot" {
		t.Fatalf("screenshot: %d %q", code, body)
	}
	for _, p := range []string{link, dir, "/tmp/screenshot-short.png", "/tmp/other.png", "/tmp/screenshot-abcdefghijklmnop.png/../x", shot[:len(shot)-4] + ".txt"} {
		if code, body := get(p); code == 200 || strings.Contains(body, "secret") {
			t.Errorf("%s: %d %q", p, code, body)
		}
	}
	if _, err := te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: link})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Fatalf("removing the planted link removed its target: %v", err)
	}
	_, err := te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: dir}))
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: shot})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(shot); err == nil {
		t.Fatal("the screenshot is still there")
	}
	_, err = te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: shot}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: "/tmp/other.png"}))
	wantCode(t, err, connect.CodePermissionDenied)
}
