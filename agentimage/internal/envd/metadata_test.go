package envd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
)

// TestUploadMetadata: X-Metadata-<Key> headers become the file's metadata (keys lowercased), answered by the upload,
// Stat and ListDir; a rewrite without metadata drops it, as the file is new.
func TestUploadMetadata(t *testing.T) {
	te := newTestEnvd(t)
	upload := func(headers map[string]string) (*http.Response, []uploaded) {
		req := must(http.NewRequest(http.MethodPost, te.url+"/files?path=/home/user/m.txt", strings.NewReader("x")))
		req.Header.Set("Content-Type", "application/octet-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp := mustDo(t, req)
		var out []uploaded
		if resp.StatusCode == 200 {
			_ = json.NewDecoder(resp.Body).Decode(&out)
		}
		return resp, out
	}
	resp, out := upload(map[string]string{"X-Metadata-Owner": "alice", "X-Metadata-run-ID": "r 1"})
	if resp.StatusCode != 200 || out[0].Metadata["owner"] != "alice" || out[0].Metadata["run-id"] != "r 1" {
		t.Fatalf("%d %+v", resp.StatusCode, out)
	}
	st, err := te.fs.Stat(ctxFor(t), connect.NewRequest(&pb.StatRequest{Path: "m.txt"}))
	if err != nil || len(st.Msg.GetEntry().GetMetadata()) != 2 || st.Msg.GetEntry().GetMetadata()["owner"] != "alice" {
		t.Fatalf("stat %v %+v", err, st)
	}
	ls, err := te.fs.ListDir(ctxFor(t), connect.NewRequest(&pb.ListDirRequest{Path: "/home/user"}))
	if err != nil || ls.Msg.GetEntries()[0].GetMetadata()["run-id"] != "r 1" {
		t.Fatalf("list %v %+v", err, ls)
	}
	if resp, _ := upload(map[string]string{"X-Metadata-Bad": "tab\there"}); resp.StatusCode != 400 {
		t.Fatalf("a control character in a value: %d", resp.StatusCode)
	}
	if resp, out := upload(nil); resp.StatusCode != 200 || out[0].Metadata != nil {
		t.Fatalf("rewrite: %d %+v", resp.StatusCode, out)
	}
	st, _ = te.fs.Stat(ctxFor(t), connect.NewRequest(&pb.StatRequest{Path: "m.txt"}))
	if len(st.Msg.GetEntry().GetMetadata()) != 0 {
		t.Fatalf("metadata survived a rewrite: %v", st.Msg.GetEntry().GetMetadata())
	}
}

// TestWatchIncludeEntry: with includeEntry, a create event carries the entry's info.
func TestWatchIncludeEntry(t *testing.T) {
	te := newTestEnvd(t)
	st, err := te.fs.WatchDir(ctxFor(t), connect.NewRequest(&pb.WatchDirRequest{Path: "/home/user", IncludeEntry: true, AllowNetworkMounts: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("first message %v %v", st.Msg(), st.Err())
	}
	writeFile(t, te.dir+"/e.txt", "abc")
	for st.Receive() {
		fe := st.Msg().GetFilesystem()
		if fe.GetName() == "e.txt" && fe.GetEntry() != nil {
			if fe.GetEntry().GetPath() != "/home/user/e.txt" {
				t.Fatalf("entry %+v", fe.GetEntry())
			}
			return
		}
	}
	t.Fatalf("no event with an entry: %v", st.Err())
}
