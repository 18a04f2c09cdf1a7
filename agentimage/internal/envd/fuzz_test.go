package envd

import (
	"bytes"
	"encoding/binary"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

func fuzzService(f *testing.F) *Service {
	root, err := workspace.New(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	procs := process.NewManager(process.Config{})
	f.Cleanup(procs.Close)
	svc := New(Deps{Root: root, Procs: procs, MaxFileBytes: 1 << 16})
	f.Cleanup(svc.Close)
	return svc
}

func enveloped(flags byte, msg string) []byte {
	var b bytes.Buffer
	b.WriteByte(flags)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(msg)))
	b.WriteString(msg)
	return b.Bytes()
}

// FuzzConnectEnvelope sends arbitrary bodies as Connect stream requests (the envelope and the JSON inside) to the
// streaming calls that run nothing: any body gets an answer (a stream error or a not_found), never a panic.
func FuzzConnectEnvelope(f *testing.F) {
	svc := fuzzService(f)
	h := svc.Handler()
	f.Add(enveloped(0, `{"process":{"pid":1}}`))
	f.Add(enveloped(0, `{"process":{"tag":"x"}}`))
	f.Add(enveloped(1, `{}`))
	f.Add(enveloped(2, `{}`))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Add(append(enveloped(0, `{}`), enveloped(0, `{}`)...))
	f.Add(enveloped(0, `{"path":"/home/user/nope","recursive":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/process.Process/Connect", "/filesystem.Filesystem/WatchDir"} {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/connect+json")
			req.Header.Set("Connect-Timeout-Ms", "1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == 0 {
				t.Fatal("no answer")
			}
		}
	})
}

// FuzzMultipartParts feeds arbitrary multipart bodies to the parser of POST /files' parts.
func FuzzMultipartParts(f *testing.F) {
	const boundary = "b0undary"
	var seed bytes.Buffer
	mw := multipart.NewWriter(&seed)
	_ = mw.SetBoundary(boundary)
	w, _ := mw.CreateFormFile("file", "/home/user/a/b.txt")
	_, _ = w.Write([]byte("data"))
	_ = mw.Close()
	f.Add(seed.Bytes())
	f.Add([]byte("--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%2Fhome%2Fx\r\n\r\nx\r\n--b0undary--\r\n"))
	f.Add([]byte("--b0undary\r\nContent-Disposition: attachment\r\n\r\n--b0undary--"))
	f.Fuzz(func(t *testing.T, body []byte) {
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		parts := 0
		_ = eachFilePart(mr, 16, func(filename string, r io.Reader) error {
			parts++
			_, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
			return err
		})
		if parts > 16 {
			t.Fatalf("%d parts passed the limit of 16", parts)
		}
	})
}
