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
	if keep := len(c.marker) - 1; keep > 0 && len(data) > 0 {
		if keep > len(data) {
			keep = len(data)
		}
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
		}
		if len(p) > 0 {
			c.truncated = true
		}
		return
	}
	c.buf = append(c.buf, p...)
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
