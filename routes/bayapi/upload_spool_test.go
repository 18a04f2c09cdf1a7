package bayapi

import (
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestSpooledUploadsAreBoundedPerOwner: alice holds her two spool slots with uploads whose file part comes first and
// never ends; her third such upload is refused with 429 rate_limited and Retry-After, while bob's spooled upload and
// alice's own streamed upload (path first) still succeed.
func TestSpooledUploadsAreBoundedPerOwner(t *testing.T) {
	a := newTestAPI(t)
	mine := a.create(t, keyAlice, nil)
	bobs := a.create(t, keyBob, nil)
	send := func(key, id string, body io.Reader, ct string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest("POST", a.srv.URL+"/v1/sandboxes/"+id+"/filesystem/upload", body)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	// Two stalled spooling uploads: the file part has started and its writer is never closed.
	var writers []*io.PipeWriter
	done := make(chan int, 2)
	for range 2 {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		mw := multipart.NewWriter(pw)
		go func() {
			fw, _ := mw.CreateFormFile("file", "stall")
			_, _ = fw.Write([]byte("the start of a file that never ends"))
		}()
		go func() {
			req, _ := http.NewRequest("POST", a.srv.URL+"/v1/sandboxes/"+mine+"/filesystem/upload", pr)
			req.Header.Set("Authorization", "Bearer "+keyAlice)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0 // the body was cut off at cleanup
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	defer func() {
		for _, w := range writers {
			w.CloseWithError(io.ErrUnexpectedEOF)
		}
		<-done
		<-done
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.h.spool.mu.Lock()
		n := a.h.spool.perOwner["alice"] + a.h.spool.perOwner["default"]
		a.h.spool.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled uploads hold %d spool slots, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	body, ct := multipartBody(t, true, "third.bin", []byte("abc"))
	resp, out := send(keyAlice, mine, body, ct)
	if resp.StatusCode != 429 || errCode(out) != service.CodeRateLimited || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("alice's third spooled upload: %d %v", resp.StatusCode, out)
	}
	body, ct = multipartBody(t, false, "streamed.bin", []byte("abc"))
	if resp, out := send(keyAlice, mine, body, ct); resp.StatusCode != 200 {
		t.Fatalf("alice's streamed upload: %d %v", resp.StatusCode, out)
	}
	body, ct = multipartBody(t, true, "bob.bin", []byte("abc"))
	if resp, out := send(keyBob, bobs, body, ct); resp.StatusCode != 200 {
		t.Fatalf("bob's spooled upload: %d %v", resp.StatusCode, out)
	}
}
