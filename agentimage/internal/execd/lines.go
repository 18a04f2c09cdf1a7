package execd

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

// MaxLineBytes bounds one stdout/stderr event: a longer line goes out in pieces of at most this size (cut on a
// UTF-8 boundary), so a command printing without newlines cannot grow the agent's memory.
const MaxLineBytes = 64 << 10

// LineSplitter cuts a stream into events the way execd does: each line without its terminator; "\r" ends a line
// as "\n" does and "\r\n" is one terminator; an empty line is sent as "\n"; a last line without a terminator is
// sent by Flush.
type LineSplitter struct {
	emit func(string) error
	buf  []byte
	cr   bool
	cut  bool // the line so far went out in pieces: its terminator must not read as an empty line
}

// NewLineSplitter returns a splitter sending each line to emit.
func NewLineSplitter(emit func(string) error) *LineSplitter {
	return &LineSplitter{emit: emit}
}

// Write consumes p, emitting every line it completes.
func (l *LineSplitter) Write(p []byte) error {
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			return l.content(p)
		}
		if err := l.content(p[:i]); err != nil {
			return err
		}
		b := p[i]
		p = p[i+1:]
		var err error
		switch {
		case len(l.buf) > 0:
			err = l.emitBuf(len(l.buf))
		case b == '\n' && l.cr: // the second half of "\r\n"
		case l.cut:
		default:
			err = l.emit("\n")
		}
		l.cr = b == '\r'
		l.cut = false
		if err != nil {
			return err
		}
	}
	return nil
}

// content adds bytes of a line, sending it in pieces while it is over MaxLineBytes.
func (l *LineSplitter) content(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	l.cr = false
	l.buf = append(l.buf, b...)
	for len(l.buf) >= MaxLineBytes {
		n := process.CompleteUTF8(l.buf[:MaxLineBytes])
		if n == 0 {
			n = MaxLineBytes
		}
		if err := l.emitBuf(n); err != nil {
			return err
		}
		l.cut = true
	}
	return nil
}

// Flush emits a pending line without a terminator.
func (l *LineSplitter) Flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	return l.emitBuf(len(l.buf))
}

func (l *LineSplitter) emitBuf(n int) error {
	s := string(l.buf[:n])
	l.buf = append(l.buf[:0], l.buf[n:]...)
	return l.emit(s)
}

// LineRange is a download's line window: Limit lines from line Offset (1-based); Limit < 0 means to the end.
type LineRange struct {
	Offset, Limit int64
}

// ParseLineRange reads the offset and limit query parameters of a download (both optional, both at least 1).
func ParseLineRange(rawOffset, rawLimit string) (LineRange, error) {
	lr := LineRange{Offset: 1, Limit: -1}
	if rawOffset != "" {
		n, err := strconv.ParseInt(rawOffset, 10, 64)
		if err != nil || n < 1 {
			return lr, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid query parameter 'offset': %s", rawOffset)
		}
		lr.Offset = n
	}
	if rawLimit != "" {
		n, err := strconv.ParseInt(rawLimit, 10, 64)
		if err != nil || n < 1 {
			return lr, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid query parameter 'limit': %s", rawLimit)
		}
		lr.Limit = n
	}
	return lr, nil
}

// CopyLines writes the lines of r in lr as execd counts and joins them: lines end at "\n"; each is written without
// its trailing "\r" and "\n" characters; lines are joined by "\n" with none after the last. Lines are streamed, never
// held whole, so a file that is one huge line costs no memory.
func CopyLines(w io.Writer, r io.Reader, lr LineRange) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line, written int64
	inLine := false // inside a line that has bytes
	var heldCR int  // trailing '\r's of the current line not yet written: only written if more bytes follow
	selected := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if !inLine {
				line++
				inLine = true
				selected = line >= lr.Offset
				if selected && written > 0 {
					if _, werr := w.Write([]byte{'\n'}); werr != nil {
						return werr
					}
				}
			}
			end := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
			body := chunk
			if end {
				body = body[:len(body)-1]
			}
			// split body into what is certainly content and a run of trailing '\r's
			trail := 0
			for trail < len(body) && body[len(body)-1-trail] == '\r' {
				trail++
			}
			content := body[:len(body)-trail]
			if selected {
				if len(content) > 0 {
					for ; heldCR > 0; heldCR-- {
						if _, werr := w.Write([]byte{'\r'}); werr != nil {
							return werr
						}
					}
					if _, werr := w.Write(content); werr != nil {
						return werr
					}
				}
				heldCR += trail
			}
			if end || err == io.EOF {
				inLine = false
				heldCR = 0
				if selected {
					written++
					if lr.Limit >= 0 && written >= lr.Limit {
						return nil
					}
				}
			}
		}
		switch err {
		case nil, bufio.ErrBufferFull:
			continue
		case io.EOF:
			return nil
		default:
			return err
		}
	}
}
