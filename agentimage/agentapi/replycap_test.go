package agentapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReadBoundedJSON: strings are cut on character boundaries (never inside an escape or a UTF-8 sequence), the
// result is still JSON, and a reply over the total bound is refused.
func TestReadBoundedJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		cut      bool
	}{
		{"short", `{"stdout":"abc","n":1}`, false},
		{"ascii", `{"stdout":"abcdefghij"}`, true},
		{"escape at the cut", `{"stdout":"abcd\"efgh\u00e9ij\\k"}`, true},
		{"utf-8 at the cut", `{"stdout":"abcéééééé"}`, true},
		{"nested", `{"a":{"b":["0123456789","x"]},"images":["` + strings.Repeat("QUJD", 10) + `"]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, cut, err := readBoundedJSON(strings.NewReader(tc.in), 1<<20, 5, true)
			if err != nil || cut != tc.cut {
				t.Fatalf("cut %v, err %v", cut, err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s is not JSON: %v", b, err)
			}
			var walk func(any)
			walk = func(v any) {
				switch x := v.(type) {
				case string:
					if len(x) > 5+3 || !utf8.ValidString(x) {
						t.Errorf("string %q kept", x)
					}
				case map[string]any:
					for _, e := range x {
						walk(e)
					}
				case []any:
					for _, e := range x {
						walk(e)
					}
				}
			}
			walk(v)
		})
	}
	if _, _, err := readBoundedJSON(strings.NewReader(`[`+strings.Repeat(`"a",`, 1000)+`"a"]`), 100, 5, true); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("many small strings: %v, want too large", err)
	}
	if _, _, err := readBoundedJSON(strings.NewReader(strings.Repeat(" ", 200)+`{}`), 100, 5, false); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("untruncatable reply: %v, want too large", err)
	}
}

// hugeReply streams a kernel result whose repr is n bytes without holding it.
func hugeReply(n int) io.Reader {
	head := strings.NewReader(`{"success":true,"stdout":"hi\n","result":"`)
	tail := strings.NewReader(`","images":[],"execution_count":1}`)
	return io.MultiReader(head, io.LimitReader(repeatReader('x'), int64(n)), tail)
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestHostileAgentHugeReply: an agent (sandbox code can replace or impersonate it) answers a Python cell with a
// 200 MB result. The client keeps MaxReplyString bytes of it, marks the result truncated, and the rest of the reply
// (stdout, execution count) is intact; a non-truncatable reply of that size is refused with too_large.
func TestHostileAgentHugeReply(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, hugeReply(200<<20))
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "tok", srv.Client())
	res, err := c.PythonExec(context.Background(), KernelExecRequest{Code: "'x'*200_000_000"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OutputTruncated || res.Result == nil || len(*res.Result) != MaxReplyString || res.Stdout != "hi\n" || res.ExecutionCount != 1 {
		t.Fatalf("truncated=%v result %d bytes, stdout %q, count %d", res.OutputTruncated, len(*res.Result), res.Stdout, res.ExecutionCount)
	}
	_, err = c.FSStat(context.Background(), "x")
	var ae *Error
	if !errors.Is(err, ErrReplyTooLarge) || !errors.As(err, &ae) || ae.Code != CodeTooLarge {
		t.Fatalf("huge untruncatable reply: %v", err)
	}
}

// TestSSELineBound: an event stream line longer than MaxSSELine ends the stream with an error instead of growing.
func TestSSELineBound(t *testing.T) {
	r := bufio.NewReader(io.MultiReader(strings.NewReader("event: stdout\ndata: "), io.LimitReader(repeatReader('a'), MaxSSELine+10), strings.NewReader("\n\n")))
	if _, err := ReadSSE(r); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("huge line: %v", err)
	}
	ev, err := ReadSSE(bufio.NewReader(strings.NewReader("event: end\nid: 3\ndata: {\"status\":\"exited\"}\n\n")))
	if err != nil || ev.Event != EventEnd || ev.ID != "3" {
		t.Fatalf("ordinary event: %+v %v", ev, err)
	}
}

// FuzzReadBoundedJSON: for any reply that is JSON, the bounded copy is JSON too, no bigger than the input, and
// cut only when some string value was longer than the bound.
func FuzzReadBoundedJSON(f *testing.F) {
	for _, s := range []string{`{"stdout":"abcdefgh","images":["QUJDRA=="]}`, `["\u00e9\u00e9\u00e9\u00e9", "\\\\\\\\\\"]`,
		`{"a":{"bbbbbbbbbb":"cccccccc"}}`, `"éééééééé"`, `{"k":[1,2,{"x":"yyyyyyy"}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			_, _, _ = readBoundedJSON(strings.NewReader(in), 1<<16, 4, true)
			return
		}
		b, cut, err := readBoundedJSON(strings.NewReader(in), 1<<16, 4, true)
		if err != nil {
			if len(in) > 1<<16 {
				return
			}
			t.Fatalf("%q: %v", in, err)
		}
		if !json.Valid(b) {
			t.Fatalf("%q became %q, not JSON", in, b)
		}
		if len(b) > len(in) || (!cut && string(b) != in) {
			t.Fatalf("%q became %q (cut %v)", in, b, cut)
		}
	})
}
