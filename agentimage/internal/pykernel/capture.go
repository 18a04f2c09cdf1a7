package pykernel

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// capture drains one of the kernel's output pipes into the running cell's buffer. The kernel ends each cell by
// writing the cell's marker to the pipe, so the agent knows it has read everything the cell printed — including
// output of subprocesses the cell waited for — rather than guessing with a delay.
type capture struct {
	limit int

	mu        sync.Mutex
	buf       []byte
	truncated bool
	// ended is set once the armed marker was seen; later output belongs to the next cell and waits in next.
	ended bool
	next  []byte
	// carry holds the tail of the stream that might be the start of a marker split across two reads.
	carry  []byte
	marker []byte
	seen   chan struct{}
	closed bool
	// sink, when set, also receives the running cell's output as it is stored (ExecStream); it must not block.
	sink func([]byte)
}

func newCapture(limit int) *capture { return &capture{limit: limit} }

// drain reads r until it ends (the kernel exited).
func (c *capture) drain(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.write(chunk[:n])
		}
		if err != nil {
			c.mu.Lock()
			c.store(c.carry)
			c.carry = nil
			c.closed = true
			if c.seen != nil {
				close(c.seen)
				c.seen = nil
			}
			c.mu.Unlock()
			return
		}
	}
}

func (c *capture) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := append(c.carry, p...)
	c.carry = nil
	for len(c.marker) > 0 {
		i := bytes.Index(data, c.marker)
		if i < 0 {
			break
		}
		c.store(data[:i])
		data = data[i+len(c.marker):]
		c.marker = nil
		c.ended = true
		if c.seen != nil {
			close(c.seen)
			c.seen = nil
		}
	}
	// Hold back only a tail that could be the start of the marker, so output streams as printed (ExecStream).
	if keep := markerStart(data, c.marker); keep > 0 {
		c.store(data[:len(data)-keep])
		c.carry = append([]byte(nil), data[len(data)-keep:]...)
		return
	}
	c.store(data)
}

// store appends to the cell's buffer up to the limit. Caller holds mu.
func (c *capture) store(p []byte) {
	if c.ended {
		if room := c.limit - len(c.next); room > 0 {
			c.next = append(c.next, p[:min(room, len(p))]...)
		}
		return
	}
	if room := c.limit - len(c.buf); room < len(p) {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
			c.emit(p[:room])
		}
		if len(p) > 0 {
			c.truncated = true
		}
		return
	}
	c.buf = append(c.buf, p...)
	c.emit(p)
}

// emit hands stored output to the sink. Caller holds mu.
func (c *capture) emit(p []byte) {
	if c.sink != nil && len(p) > 0 {
		c.sink(p)
	}
}

// setSink sets (or, with nil, clears) the receiver of the running cell's output.
func (c *capture) setSink(sink func([]byte)) {
	c.mu.Lock()
	c.sink = sink
	c.mu.Unlock()
}

// expect arms the marker that ends the next cell's output.
func (c *capture) expect(marker []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.marker = marker
	c.seen = make(chan struct{})
	if c.closed {
		close(c.seen)
		c.seen = nil
	}
}

// take waits up to wait for the armed marker (a cell that closed its own stdout never writes it), then returns and
// resets what was captured.
func (c *capture) take(wait time.Duration) (string, bool) {
	c.mu.Lock()
	seen := c.seen
	c.mu.Unlock()
	if seen != nil {
		t := time.NewTimer(wait)
		select {
		case <-seen:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.marker != nil { // never came: what we held back is output after all
		c.store(c.carry)
		c.carry = nil
		c.marker = nil
		c.seen = nil
	}
	out, truncated := string(c.buf), c.truncated
	c.buf, c.truncated, c.next, c.ended = c.next, false, nil, false
	return out, truncated
}

// markerStart is the length of the longest tail of data that is a proper prefix of marker.
func markerStart(data, marker []byte) int {
	for k := min(len(marker)-1, len(data)); k > 0; k-- {
		if bytes.Equal(data[len(data)-k:], marker[:k]) {
			return k
		}
	}
	return 0
}
