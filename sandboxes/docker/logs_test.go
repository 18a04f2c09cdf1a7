package docker

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

func frame(stream byte, msg string) []byte {
	b := make([]byte, 8, 8+len(msg))
	b[0] = stream
	binary.BigEndian.PutUint32(b[4:], uint32(len(msg)))
	return append(b, msg...)
}

func TestReadLogFrames(t *testing.T) {
	long := strings.Repeat("é", sandboxes.MaxLogLineBytes) // two bytes each: cut inside the budget, on a character
	var ok bytes.Buffer
	ok.Write(frame(1, "2026-11-29T11:41:36.123456789Z hello\n"))
	ok.Write(frame(2, "2026-11-29T11:41:37Z {\"level\":\"INFO\"}\n"))
	ok.Write(frame(1, "no time here\n"))
	ok.Write(frame(1, "2026-11-29T11:41:38Z "+long+"\n"))
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int
		want  []string
		err   bool
	}{
		{"lines", ok.Bytes(), 0, []string{"stdout 11:41:36 hello", "stderr 11:41:37 {\"level\":\"INFO\"}", "stdout 00:00:00 no time here", "stdout 11:41:38 long"}, false},
		{"limit", ok.Bytes(), 2, []string{"stdout 11:41:36 hello", "stderr 11:41:37 {\"level\":\"INFO\"}"}, false},
		{"cut frame", append(frame(1, "2026-11-29T11:41:36Z a\n"), frame(1, "2026-11-29T11:41:36Z bbbb")[:12]...), 0, []string{"stdout 11:41:36 a"}, false},
		{"not framed", []byte("plain text output\n"), 0, nil, true},
		{"huge frame", []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, 0, nil, true},
		{"empty", nil, 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := ReadLogFrames(bytes.NewReader(tc.in), tc.limit)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			var got []string
			for _, l := range lines {
				text := l.Text
				if len(text) > 100 {
					if len(text) > sandboxes.MaxLogLineBytes || !strings.HasPrefix(long, text) {
						t.Errorf("a long line kept %d bytes", len(text))
					}
					text = "long"
				}
				got = append(got, l.Stream+" "+l.Time.UTC().Format(time.TimeOnly)+" "+text)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// FuzzReadLogFrames: whatever a tenant's processes wrote and the engine framed, the reader never panics, answers
// at most limit lines, and no line is over the cut.
func FuzzReadLogFrames(f *testing.F) {
	f.Add(frame(1, "2026-11-29T11:41:36.123456789Z hello\n"), 3)
	f.Add(append(frame(2, "x"), frame(1, "2026-11-29T11:41:36Z")...), 1)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 200, 'a'}, 0)
	f.Fuzz(func(t *testing.T, in []byte, limit int) {
		limit %= 50
		lines, _ := ReadLogFrames(bytes.NewReader(in), limit)
		if limit > 0 && len(lines) > limit {
			t.Fatalf("%d lines over the limit %d", len(lines), limit)
		}
		for _, l := range lines {
			if len(l.Text) > sandboxes.MaxLogLineBytes {
				t.Fatalf("a line of %d bytes", len(l.Text))
			}
		}
	})
}
