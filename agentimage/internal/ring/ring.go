// Package ring is a byte ring addressed by absolute stream offset: writers append, any number of readers read from
// an offset of their own and wait for more. Output of processes and PTY sessions lives in these rings so a client
// can disconnect and resume where it left off, as long as the bytes have not been overwritten.
package ring

import (
	"sync"
)

// Ring keeps the last Size bytes written to it. Its memory grows with use up to Size.
type Ring struct {
	mu      sync.Mutex
	size    int
	buf     []byte // index of absolute offset o is o % size
	end     int64  // total bytes ever written
	closed  bool
	changed chan struct{} // closed and replaced on every write and on Close
}

// New returns a ring keeping the last size bytes.
func New(size int) *Ring {
	if size <= 0 {
		size = 1
	}
	return &Ring{size: size, changed: make(chan struct{})}
}

// GoneError says the requested offset has been overwritten; Oldest is the oldest offset still held.
type GoneError struct {
	Offset, Oldest int64
}

func (e *GoneError) Error() string { return "ring: offset overwritten" }

// Write appends p. It never fails; writing to a closed ring drops p.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return n, nil
	}
	if n > r.size { // only the tail survives
		r.end += int64(n - r.size)
		p = p[n-r.size:]
	}
	if len(r.buf) < r.size && int64(len(r.buf)) != r.end {
		// a write larger than the ring skipped the growing phase: lay the whole buffer out now
		r.buf = append(r.buf, make([]byte, r.size-len(r.buf))...)
	}
	for len(p) > 0 {
		if len(r.buf) < r.size && int64(len(r.buf)) == r.end {
			// still growing: the slice's length is the next index
			take := min(len(p), r.size-len(r.buf))
			r.buf = append(r.buf, p[:take]...)
			p = p[take:]
			r.end += int64(take)
			continue
		}
		i := int(r.end % int64(r.size))
		c := copy(r.buf[i:], p)
		p = p[c:]
		r.end += int64(c)
	}
	r.notifyLocked()
	return n, nil
}

// Close marks the end of the stream and releases spare capacity; readers see closed once they reach the end.
func (r *Ring) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if cap(r.buf) > len(r.buf)+len(r.buf)/4 {
		r.buf = append([]byte(nil), r.buf...)
	}
	r.notifyLocked()
}

func (r *Ring) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Bounds returns the oldest offset held, the end offset (total written) and whether the ring is closed.
func (r *Ring) Bounds() (oldest, end int64, closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.oldestLocked(), r.end, r.closed
}

func (r *Ring) oldestLocked() int64 {
	return max(0, r.end-int64(r.size))
}

// ReadAt copies up to max bytes starting at absolute offset off. It returns the bytes, whether the ring is closed
// with nothing past them, and a channel that is closed when the ring changes (for waiting when no bytes came).
// An offset older than the ring holds yields *GoneError; one past the end yields no bytes.
func (r *Ring) ReadAt(off int64, max int) (data []byte, eof bool, changed <-chan struct{}, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if oldest := r.oldestLocked(); off < oldest {
		return nil, false, r.changed, &GoneError{Offset: off, Oldest: oldest}
	}
	if off >= r.end {
		return nil, r.closed, r.changed, nil
	}
	n := int(min(int64(max), r.end-off))
	data = make([]byte, n)
	r.copyLocked(data, off)
	return data, r.closed && off+int64(n) == r.end, r.changed, nil
}

func (r *Ring) copyLocked(dst []byte, off int64) {
	for len(dst) > 0 {
		i := int(off % int64(r.size))
		c := copy(dst, r.buf[i:])
		dst = dst[c:]
		off += int64(c)
	}
}

// Held is how many bytes the ring holds now.
func (r *Ring) Held() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end - r.oldestLocked()
}

// Tail returns the last at most max bytes held and the offset of the first of them.
func (r *Ring) Tail(max int) ([]byte, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.oldestLocked()
	if r.end-start > int64(max) {
		start = r.end - int64(max)
	}
	out := make([]byte, r.end-start)
	r.copyLocked(out, start)
	return out, start
}
