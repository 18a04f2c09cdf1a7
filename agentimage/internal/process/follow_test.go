package process

import (
	"testing"
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
