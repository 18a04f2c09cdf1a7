package docker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandgate/sandgate/sandboxes"
)

// A container's output, read from the engine's log (json-file, capped at 10 MB per container: docker.go). The
// stream is the engine's multiplexed framing (8-byte header: stream, three zero bytes, big-endian size), each
// frame one log message with its RFC 3339 timestamp in front. Everything in it was written by the tenant's
// processes, so the reader trusts nothing: a frame over maxLogFrame ends the read, a line is cut at
// sandboxes.MaxLogLineBytes, and at most maxLogStream bytes are read whatever the engine sends.

const (
	maxLogFrame  = 1 << 20  // docker splits messages at 16 KiB; anything far larger is not its framing
	maxLogStream = 32 << 20 // a json-file log holds at most 10 MB of messages
)

// Logs implements sandboxes.LogDriver.
func (d *Driver) Logs(ctx context.Context, containerID string, q sandboxes.LogQuery) ([]sandboxes.LogLine, error) {
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Tail: "all"}
	if !q.Since.IsZero() {
		opts.Since = unixNano(q.Since)
	}
	if !q.Until.IsZero() {
		opts.Until = unixNano(q.Until)
	}
	if q.Backward {
		opts.Tail = strconv.Itoa(q.Limit)
	}
	rc, err := d.cli.ContainerLogs(ctx, containerID, opts)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return []sandboxes.LogLine{}, nil // removed: it has no output any more
		}
		return nil, fmt.Errorf("reading container %s's log: %w", containerID, err)
	}
	defer rc.Close()
	return ReadLogFrames(io.LimitReader(rc, maxLogStream), q.Limit)
}

func unixNano(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

// ReadLogFrames parses the engine's multiplexed, timestamped log stream into at most limit lines (limit <= 0: no
// limit). A truncated last frame ends the lines without an error; a malformed header is an error.
func ReadLogFrames(r io.Reader, limit int) ([]sandboxes.LogLine, error) {
	br := bufio.NewReader(r)
	out := []sandboxes.LogLine{}
	var hdr [8]byte
	for limit <= 0 || len(out) < limit {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, nil
			}
			return out, err
		}
		var stream string
		switch hdr[0] {
		case 1:
			stream = "stdout"
		case 2:
			stream = "stderr"
		default:
			return out, fmt.Errorf("log stream: frame of stream %d: not the engine's framing", hdr[0])
		}
		size := binary.BigEndian.Uint32(hdr[4:])
		if size > maxLogFrame {
			return out, fmt.Errorf("log stream: a frame of %d bytes", size)
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(br, frame); err != nil {
			return out, nil // cut off: what was whole is answered
		}
		out = append(out, parseLogMessage(stream, frame))
	}
	return out, nil
}

// parseLogMessage splits "<RFC 3339 time> <text>\n"; a message without a readable time keeps its whole text and a
// zero time.
func parseLogMessage(stream string, b []byte) sandboxes.LogLine {
	line := sandboxes.LogLine{Stream: stream}
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	for i := 0; i < len(b) && i < 40; i++ {
		if b[i] == ' ' {
			if t, err := time.Parse(time.RFC3339Nano, string(b[:i])); err == nil {
				line.Time, b = t, b[i+1:]
			}
			break
		}
	}
	if len(b) > sandboxes.MaxLogLineBytes {
		b = b[:sandboxes.MaxLogLineBytes]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1] // do not end inside a character
		}
	}
	line.Text = string(b)
	return line
}
