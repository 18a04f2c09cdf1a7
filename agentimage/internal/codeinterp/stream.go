package codeinterp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// Line types of the /execute stream (reference/e2b.md §5.1).
const (
	lineStdout     = "stdout"
	lineStderr     = "stderr"
	lineResult     = "result"
	lineError      = "error"
	lineCount      = "number_of_executions"
	lineEnd        = "end_of_execution"
	lineKeepalive  = "keepalive"
	timestampStyle = "2006-01-02T15:04:05.000000Z07:00"
)

// lineWriter writes the NDJSON lines of one /execute answer. Each line goes out whole, in one Write followed by a
// flush: the SDK decodes every network chunk on its own, so a line (or a UTF-8 character) split across chunks
// would be corrupted. It is safe for concurrent use; after the first failed write (the client left) it writes
// nothing more.
type lineWriter struct {
	mu   sync.Mutex
	w    io.Writer
	f    http.Flusher
	last time.Time
	err  error
}

func newLineWriter(w io.Writer) *lineWriter {
	lw := &lineWriter{w: w, last: time.Now()}
	lw.f, _ = w.(http.Flusher)
	return lw
}

// send writes one line: v encoded as JSON, then '\n'.
func (lw *lineWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	if _, err := lw.w.Write(b); err != nil {
		lw.err = err
		return err
	}
	if lw.f != nil {
		lw.f.Flush()
	}
	lw.last = time.Now()
	return nil
}

// idleSince is when the last line went out.
func (lw *lineWriter) idleSince() time.Time {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.last
}

// keepalive writes a keepalive line whenever the stream has been silent for every, until stop closes. The SDK
// ignores the line; it keeps proxies and the client's connection from reading silence as a dead stream.
func (lw *lineWriter) keepalive(every time.Duration, stop <-chan struct{}) {
	tick := max(every/5, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if time.Since(lw.idleSince()) >= every {
				if lw.send(map[string]string{"type": lineKeepalive}) != nil {
					return
				}
			}
		}
	}
}

// textLine is a stdout or stderr line.
type textLine struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Timestamp string `json:"timestamp"`
}

// errorLine is a cell's error: traceback is one string, as upstream sends it.
type errorLine struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

type countLine struct {
	Type           string `json:"type"`
	ExecutionCount int    `json:"execution_count"`
}

// outbox takes a running cell's output from the kernel, which must not be blocked, and hands it to the pump that
// writes it as stdout and stderr lines. It holds at most what the kernel's per-cell output cap lets through.
type outbox struct {
	mu     sync.Mutex
	chunks []chunk
	wake   chan struct{}
	// carry holds, per stream, the start of a UTF-8 character whose rest has not arrived yet.
	carry map[string][]byte
	// linger is how long the pump holds the start of a line for its end; default lineLinger.
	linger time.Duration
}

type chunk struct {
	stream string
	data   []byte
}

func newOutbox() *outbox {
	return &outbox{wake: make(chan struct{}, 1), carry: map[string][]byte{}, linger: lineLinger}
}

// add queues p (copied) for stream; it never blocks.
func (o *outbox) add(stream string, p []byte) {
	o.mu.Lock()
	if n := len(o.chunks); n > 0 && o.chunks[n-1].stream == stream {
		o.chunks[n-1].data = append(o.chunks[n-1].data, p...)
	} else {
		o.chunks = append(o.chunks, chunk{stream: stream, data: append([]byte(nil), p...)})
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take returns the queued output as text, cut on character boundaries; final also returns what is held back.
func (o *outbox) take(final bool) []chunk {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []chunk
	for _, c := range o.chunks {
		data := append(o.carry[c.stream], c.data...)
		o.carry[c.stream] = nil
		if !final {
			cut := completeUTF8(data)
			if cut < len(data) {
				o.carry[c.stream] = append([]byte(nil), data[cut:]...)
				data = data[:cut]
			}
		}
		if len(data) > 0 {
			out = append(out, chunk{stream: c.stream, data: data})
		}
	}
	o.chunks = nil
	if final {
		for _, s := range []string{lineStdout, lineStderr} {
			if len(o.carry[s]) > 0 {
				out = append(out, chunk{stream: s, data: o.carry[s]})
				o.carry[s] = nil
			}
		}
	}
	return out
}

// lineLinger is how long the start of an output line may wait for its end before it goes out alone: Python writes
// print's text and its newline separately, and the SDK shows each piece as an entry of logs.stdout.
const lineLinger = 20 * time.Millisecond

// maxPartial bounds the start of a line held back for its end.
const maxPartial = 64 << 10

// pump writes queued output as lines until done closes, then writes the rest and returns. Complete lines go out at
// once; the start of a line waits up to o.linger for its end.
func (o *outbox) pump(lw *lineWriter, done <-chan struct{}) {
	var partial chunk
	var timer *time.Timer
	var linger <-chan time.Time
	flush := func() {
		if len(partial.data) > 0 {
			o.write(lw, []chunk{partial})
		}
		partial = chunk{}
		if timer != nil {
			timer.Stop()
		}
		timer, linger = nil, nil
	}
	handle := func(chunks []chunk) {
		for _, c := range chunks {
			if len(partial.data) > 0 && partial.stream != c.stream {
				flush() // keep the order between stdout and stderr
			}
			data := append(partial.data, c.data...)
			partial.data = nil
			cut := bytes.LastIndexByte(data, '\n') + 1
			if len(data)-cut > maxPartial {
				cut = len(data)
			}
			if cut > 0 {
				o.write(lw, []chunk{{stream: c.stream, data: data[:cut]}})
			}
			if cut == len(data) {
				flush()
				continue
			}
			partial = chunk{stream: c.stream, data: append([]byte(nil), data[cut:]...)}
			if timer == nil {
				timer = time.NewTimer(o.linger)
				linger = timer.C
			}
		}
	}
	for {
		select {
		case <-o.wake:
			handle(o.take(false))
		case <-linger:
			timer, linger = nil, nil
			flush()
		case <-done:
			handle(o.take(true))
			flush()
			return
		}
	}
}

func (o *outbox) write(lw *lineWriter, chunks []chunk) {
	for _, c := range chunks {
		_ = lw.send(textLine{Type: c.stream, Text: string(c.data), Timestamp: time.Now().UTC().Format(timestampStyle)})
	}
}

// completeUTF8 is the length of b's prefix that does not end inside a UTF-8 character: at most the last three
// bytes are held back, and only when they start a character that is still incomplete.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		c := b[i]
		if c < utf8.RuneSelf {
			return len(b)
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
