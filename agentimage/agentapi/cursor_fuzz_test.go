package agentapi

import "testing"

// FuzzParseCursor: whatever cursor a caller sends, the parse never panics, and an accepted one has two offsets of
// at least 0 that its own spelling reads back as.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "12:34", " 5 ", "-1", "1:-1", "1:2:3", ":", "9223372036854775807:0", "9223372036854775808", "+3", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		if c.Stdout < 0 || c.Stderr < 0 {
			t.Fatalf("%q gave %+v", s, c)
		}
		if back, err := ParseCursor(c.String()); err != nil || back != c {
			t.Fatalf("%q gave %+v, spelt %q, which reads as %+v %v", s, c, c.String(), back, err)
		}
	})
}
