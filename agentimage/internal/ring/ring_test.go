package ring

import (
	"bytes"
	"errors"
	"testing"
)

func TestRingOffsets(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size       int
		writes     []string
		readAt     int64
		want       string
		wantGone   bool
		wantOldest int64
	}{
		{"empty", 8, nil, 0, "", false, 0},
		{"within", 8, []string{"abc", "de"}, 1, "bcde", false, 0},
		{"exactly full", 4, []string{"abcd"}, 0, "abcd", false, 0},
		{"wrapped", 4, []string{"abc", "def"}, 2, "cdef", false, 2},
		{"wrapped read in middle", 4, []string{"abc", "def", "g"}, 4, "efg", false, 3},
		{"gone", 4, []string{"abcdefgh"}, 3, "", true, 4},
		{"huge write keeps tail", 4, []string{"ab", "0123456789"}, 8, "6789", false, 8},
		{"past end", 8, []string{"ab"}, 5, "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(tc.size)
			for _, w := range tc.writes {
				r.Write([]byte(w))
			}
			got, _, _, err := r.ReadAt(tc.readAt, 100)
			var gone *GoneError
			if tc.wantGone {
				if !errors.As(err, &gone) || gone.Oldest != tc.wantOldest {
					t.Fatalf("want gone with oldest %d, got %v", tc.wantOldest, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ReadAt(%d) = %q, %v; want %q", tc.readAt, got, err, tc.want)
			}
			if oldest, _, _ := r.Bounds(); oldest != tc.wantOldest {
				t.Fatalf("oldest %d, want %d", oldest, tc.wantOldest)
			}
		})
	}
}

func TestRingLongStreamMatchesTail(t *testing.T) {
	r := New(1000)
	var all bytes.Buffer
	for i := 0; i < 5000; i++ {
		chunk := bytes.Repeat([]byte{byte('a' + i%26)}, i%37+1)
		r.Write(chunk)
		all.Write(chunk)
	}
	tail, start := r.Tail(1 << 20)
	if start != int64(all.Len()-1000) || !bytes.Equal(tail, all.Bytes()[start:]) {
		t.Fatalf("tail mismatch: start %d", start)
	}
	got, _, _, err := r.ReadAt(start+17, 300)
	if err != nil || !bytes.Equal(got, all.Bytes()[start+17:start+317]) {
		t.Fatalf("ReadAt mismatch: %v", err)
	}
}

func TestRingCloseAndWake(t *testing.T) {
	r := New(16)
	_, eof, changed, _ := r.ReadAt(0, 10)
	if eof {
		t.Fatal("eof before close")
	}
	r.Write([]byte("x"))
	select {
	case <-changed:
	default:
		t.Fatal("write did not wake readers")
	}
	r.Close()
	r.Write([]byte("dropped"))
	got, eof, _, _ := r.ReadAt(0, 10)
	if string(got) != "x" || !eof {
		t.Fatalf("after close: %q eof=%v", got, eof)
	}
}
