package sse

import (
	"bufio"
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		name, event, id string
		data            string
		want            string
	}{
		{"full", "stdout", "3:0", `{"data":"abc"}`, "event: stdout\nid: 3:0\ndata: {\"data\":\"abc\"}\n\n"},
		{"no id", "keepalive", "", `{}`, "event: keepalive\ndata: {}\n\n"},
		{"multi-line data", "x", "", "a\nb", "event: x\ndata: a\ndata: b\n\n"},
		{"newline in event name cannot inject fields", "x\ndata: evil", "", "1", "event: x data: evil\ndata: 1\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			Encode(&b, tc.event, tc.id, []byte(tc.data))
			if b.String() != tc.want {
				t.Fatalf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

// TestRoundTrip writes events with Writer and reads them back with the client's parser.
func TestRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if w.Started() {
		t.Fatal("started before the first event")
	}
	chunks := []agentapi.OutputChunk{{Data: "héllo\n", Encoding: "utf8", Offset: 0}, {Data: "line with \"quotes\"", Encoding: "utf8", Offset: 7}}
	for i, c := range chunks {
		if err := w.Send(agentapi.EventStdout, agentapi.Cursor{Stdout: int64(i)}.String(), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Send(agentapi.EventEnd, "2:0", agentapi.ExecResult{ID: "p", Status: agentapi.StatusExited}); err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	r := bufio.NewReader(rec.Body)
	for i, c := range chunks {
		ev, err := agentapi.ReadSSE(r)
		if err != nil || ev.Event != agentapi.EventStdout || ev.Chunk == nil || *ev.Chunk != c {
			t.Fatalf("event %d: %+v %v", i, ev, err)
		}
	}
	ev, err := agentapi.ReadSSE(r)
	if err != nil || ev.Event != agentapi.EventEnd || ev.Process.Status != agentapi.StatusExited || ev.ID != "2:0" {
		t.Fatalf("end: %+v %v", ev, err)
	}
}
