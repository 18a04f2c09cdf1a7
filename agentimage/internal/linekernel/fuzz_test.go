package linekernel

import "testing"

// FuzzTee: whatever the program writes to fd 5 (tenant code can write to it too) and whatever result lengths
// come back, the tee never panics, never hands a cell more than it read, and never reports more streamed bytes
// than the result holds. ops is read two bytes at a time: an even first byte writes the second byte's count of
// bytes, an odd one ends the cell with a result of that many bytes; the low bit of the second byte of an end says
// whether the next cell streams.
func FuzzTee(f *testing.F) {
	f.Add([]byte{0, 5, 1, 3, 0, 7, 1, 2})
	f.Add([]byte{1, 9, 0, 4, 0, 4, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tt tee
		got := 0
		out := func(_ string, p []byte) { got += len(p) }
		tt.begin(out)
		read := 0
		for i := 0; i+1 < len(ops); i += 2 {
			n := int(ops[i+1])
			if ops[i]%2 == 0 {
				tt.write(make([]byte, n))
				read += n
				continue
			}
			streamed := tt.end(n)
			if streamed > n || streamed < 0 || got > read {
				t.Fatalf("end(%d) = %d, handed out %d of %d read", n, streamed, got, read)
			}
			if ops[i+1]%2 == 0 {
				tt.begin(out)
			} else {
				tt.begin(nil)
			}
		}
	})
}
