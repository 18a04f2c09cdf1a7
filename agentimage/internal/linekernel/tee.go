package linekernel

import (
	"io"
	"sync"
)

// tee reads the copy of a cell's stdout that the program writes to fd 5 as printed (Spec.TeeStdout) and hands
// it to the running cell's Output. The copy and the result's stdout are the same bytes, so counting is enough to
// keep cells apart: at a cell's result, what the pipe has not delivered yet is owed, and that many bytes arriving
// later are that cell's, dropped (the result carried them).
type tee struct {
	mu   sync.Mutex
	out  Output
	cell int // bytes of the running cell read so far
	skip int // bytes still to come of cells already answered
}

// begin starts a cell whose output goes to out (nil: read and dropped, the result carries it).
func (t *tee) begin(out Output) {
	t.mu.Lock()
	t.out, t.cell = out, 0
	t.mu.Unlock()
}

// end closes the cell whose result's stdout has n bytes and returns how many of them out received.
func (t *tee) end(n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	got := t.cell
	if n > got {
		t.skip += n - got
	}
	if t.out == nil {
		got = 0
	}
	t.out, t.cell = nil, 0
	return min(got, n)
}

// drain reads r until the program exits.
func (t *tee) drain(r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (t *tee) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.skip > 0 {
		d := min(t.skip, len(p))
		t.skip -= d
		p = p[d:]
	}
	if len(p) == 0 {
		return
	}
	t.cell += len(p)
	if t.out != nil {
		t.out("stdout", p)
	}
}
