// Package sse writes server-sent events. Headers are committed with the first event, so a handler can still answer
// with a JSON error until it has something to stream.
package sse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Writer writes events to one response.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     bytes.Buffer
}

// NewWriter wraps w. Nothing is written until the first Send.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// Started reports whether headers were committed.
func (s *Writer) Started() bool { return s.started }

// Send writes one event with JSON data and flushes it.
func (s *Writer) Send(event, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encoding %s event: %w", event, err)
	}
	s.buf.Reset()
	Encode(&s.buf, event, id, b)
	return s.write(event)
}

// SendBare writes data as bare JSON followed by a blank line, with no SSE field names: the framing of OpenSandbox's
// execd, whose clients read one JSON object per line. JSON never holds a raw newline, so one event is one line.
func (s *Writer) SendBare(data any) error {
	if err := s.queueBare(data); err != nil {
		return err
	}
	return s.Flush()
}

// queueBare is SendBare without the flush: a burst of events (one per output line) goes out with one Flush.
func (s *Writer) queueBare(data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encoding event: %w", err)
	}
	s.buf.Reset()
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
	s.start()
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}

// QueueRaw queues bytes already framed by the caller (pre-encoded events on a hot path).
func (s *Writer) QueueRaw(b []byte) error {
	s.start()
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}

// Flush sends what was queued.
func (s *Writer) Flush() error {
	s.start()
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("flushing events: %w", err)
	}
	return nil
}

func (s *Writer) start() {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no") // nginx and friends: do not buffer the stream
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
}

func (s *Writer) write(event string) error {
	s.start()
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return fmt.Errorf("writing %s event: %w", event, err)
	}
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("flushing %s event: %w", event, err)
	}
	return nil
}

// Encode appends one event in SSE framing. Fields must not contain newlines; data may (each line gets its own
// data: field, which SSE clients join back with \n).
func Encode(buf *bytes.Buffer, event, id string, data []byte) {
	if event != "" {
		buf.WriteString("event: ")
		buf.WriteString(oneLine(event))
		buf.WriteByte('\n')
	}
	if id != "" {
		buf.WriteString("id: ")
		buf.WriteString(oneLine(id))
		buf.WriteByte('\n')
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		buf.WriteString("data: ")
		buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
