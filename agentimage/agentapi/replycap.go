package agentapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// A sandbox's agent is not trusted to answer with sensible sizes: code in the sandbox can print, return or forge
// replies of any size, and the gateway decodes them. Every JSON reply the Client reads is therefore bounded:
//
//   - replies whose type can say it was cut (Truncatable: exec and kernel results) keep at most MaxReplyString bytes
//     of every string (the start, cut on a character boundary) and are marked truncated, as the agent's own exec
//     ring does; the whole reply is still at most MaxReplyBytes;
//   - any other reply over MaxReplyBytes is refused with too_large rather than decoded.
//
// So a reply costs the gateway at most about MaxReplyBytes of buffer and its decoded copy, whatever the agent sends.
const (
	MaxReplyBytes  = 16 << 20
	MaxReplyString = 4 << 20
	// MaxSSELine bounds one line of an exec event stream.
	MaxSSELine = 4 << 20
)

// Truncatable is a reply type that can record that the Client cut its strings.
type Truncatable interface{ MarkTruncated() }

// MarkTruncated records that the gateway cut the result's output.
func (r *KernelExecResult) MarkTruncated() { r.OutputTruncated = true }

// MarkTruncated records that the gateway cut the result's output.
func (r *ExecResult) MarkTruncated() { r.Truncated = true }

// ErrReplyTooLarge is matched (errors.Is) by the error for a reply over the bound.
var ErrReplyTooLarge = errors.New("agent reply too large")

func replyTooLarge(max int) error {
	e := Errorf(CodeTooLarge, "the sandbox's agent answered with more than %d bytes", max)
	return errors.Join(e, ErrReplyTooLarge)
}

// readBoundedJSON reads a JSON reply from r. With truncate, every string is cut to maxString bytes (reported by
// the second result); the bytes kept must stay within maxTotal either way.
func readBoundedJSON(r io.Reader, maxTotal, maxString int, truncate bool) ([]byte, bool, error) {
	if !truncate {
		b, err := io.ReadAll(io.LimitReader(r, int64(maxTotal)+1))
		if err != nil {
			return nil, false, err
		}
		if len(b) > maxTotal {
			return nil, false, replyTooLarge(maxTotal)
		}
		return b, false, nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		out       bytes.Buffer
		inStr     bool
		esc       bool // the previous byte was a backslash
		hexLeft   int  // \uXXXX digits still to come
		strLen    int
		skipping  bool
		truncated bool
		isKey     bool   // the current string is an object member's name: never cut
		objects   []bool // open containers, true for an object
		expectKey bool   // the next string is a member name
	)
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return out.Bytes(), truncated, nil
		}
		if err != nil {
			return nil, truncated, err
		}
		keep := true
		if inStr {
			switch {
			case esc:
				esc = false
				if c == 'u' {
					hexLeft = 4
				}
				keep = !skipping
			case hexLeft > 0:
				hexLeft--
				keep = !skipping
			case c == '"':
				inStr = false
			default:
				// Cut only where a character starts: not inside an escape, not on a UTF-8 continuation byte.
				if !isKey && !skipping && strLen >= maxString && c&0xC0 != 0x80 {
					skipping, truncated = true, true
				}
				if c == '\\' {
					esc = true
				}
				keep = !skipping
				strLen++
			}
		} else {
			switch c {
			case '"':
				inStr, strLen, skipping, isKey = true, 0, false, expectKey
				expectKey = false
			case '{':
				objects = append(objects, true)
				expectKey = true
			case '[':
				objects = append(objects, false)
				expectKey = false
			case '}', ']':
				if len(objects) > 0 {
					objects = objects[:len(objects)-1]
				}
				expectKey = false
			case ',':
				expectKey = len(objects) > 0 && objects[len(objects)-1]
			case ':':
				expectKey = false
			}
		}
		if keep {
			out.WriteByte(c)
			if out.Len() > maxTotal {
				return nil, truncated, replyTooLarge(maxTotal)
			}
		}
	}
}

// readSSELine reads one line of at most max bytes, newline included.
func readSSELine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, fmt.Errorf("event stream line over %d bytes: %w", max, ErrReplyTooLarge)
		}
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}
