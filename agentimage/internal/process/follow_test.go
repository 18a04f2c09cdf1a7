package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCompleteUTF8(t *testing.T) {
	euro := []byte("€")  // e2 82 ac
	smile := []byte("😀") // f0 9f 98 80
	for _, tc := range []struct {
		name string
		in   []byte
		want int
	}{
		{"empty", nil, 0},
		{"ascii", []byte("abc"), 3},
		{"complete 3-byte", append([]byte("a"), euro...), 4},
		{"1 of 3 bytes", append([]byte("a"), euro[:1]...), 1},
		{"2 of 3 bytes", append([]byte("a"), euro[:2]...), 1},
		{"3 of 4 bytes", append([]byte("ab"), smile[:3]...), 2},
		{"only a partial rune", smile[:2], 0},
		{"lone continuation byte is not held", []byte{'a', 0x80}, 2},
		{"invalid lead byte is not held", []byte{'a', 0xff}, 2},
		{"complete 4-byte", smile, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompleteUTF8(tc.in); got != tc.want {
				t.Fatalf("CompleteUTF8(% x) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

// TestFollowOutput: the one follower under the SSE stream and envd hands out both streams in order with their
// offsets, holds back a split character only when asked (WholeRunes), calls Keepalive in silence, and returns once
// the process ended; a later follower starting from offsets gets only what follows them.
func TestFollowOutput(t *testing.T) {
	m := NewManager(Config{})
	defer m.Close()
	flag := filepath.Join(t.TempDir(), "go")
	p, err := m.Start(Spec{Argv: []string{"/bin/sh", "-c", `printf 'a\342\202'; echo e >&2; while [ ! -e "$0" ]; do sleep 0.01; done; printf '\254b'`, flag}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		wholeRunes bool
		from       int64
		want       string
	}{
		{"raw", false, 0, "stdout@0:a\xe2\x82 stderr@0:e\n stdout@3:\xacb"},
		{"whole runes", true, 0, "stdout@0:a stderr@0:e\n stdout@1:€b"},
		{"from an offset", false, 3, "stderr@0:e\n stdout@3:\xacb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			kept := 0
			err := p.FollowOutput(context.Background(), tc.from, 0, FollowOptions{Keepalive: 20 * time.Millisecond, WholeRunes: tc.wholeRunes}, Sink{
				Data: func(stream string, data []byte, off int64) error {
					got = append(got, fmt.Sprintf("%s@%d:%s", stream, off, data))
					return nil
				},
				Keepalive: func() error {
					// Silence: the command waits for the flag; let it finish once the first output went out.
					if kept++; kept == 1 {
						return os.WriteFile(flag, nil, 0o600)
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			// Chunks may be cut differently; their concatenation per stream is what counts.
			if joined := joinStreams(got); joined != joinStreams(strings.Split(tc.want, " ")) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// joinStreams concatenates each stream's data in order, checking each chunk starts where the last one ended.
func joinStreams(chunks []string) string {
	text := map[string]string{}
	next := map[string]int{}
	var order []string
	for _, c := range chunks {
		head, data, _ := strings.Cut(c, ":")
		stream, offs, _ := strings.Cut(head, "@")
		off, _ := strconv.Atoi(offs)
		if _, seen := next[stream]; !seen {
			order = append(order, stream)
			next[stream] = off
		}
		if off != next[stream] {
			return "gap in " + stream
		}
		text[stream] += data
		next[stream] += len(data)
	}
	sort.Strings(order)
	var out []string
	for _, s := range order {
		out = append(out, s+":"+text[s])
	}
	return strings.Join(out, "|")
}
