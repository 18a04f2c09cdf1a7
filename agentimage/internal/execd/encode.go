package execd

import (
	"strconv"
	"unicode/utf8"
)

// AppendLineEvent appends a stdout or stderr event, framed as execd frames it, without reflection: a chatty
// command emits one per line, and encoding/json's cost per event let such a command outrun its stream. The bytes
// decode to the same agentapi.ExecdEvent that json.Marshal would give (invalid UTF-8 becomes U+FFFD per byte).
func AppendLineEvent(buf []byte, typ, text string, ts int64) []byte {
	buf = append(buf, `{"type":"`...)
	buf = append(buf, typ...)
	buf = append(buf, `","text":`...)
	buf = appendJSONString(buf, text)
	buf = append(buf, `,"timestamp":`...)
	buf = strconv.AppendInt(buf, ts, 10)
	return append(buf, "}\n\n"...)
}

const hex = "0123456789abcdef"

func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' { // valid JSON either way; escaped as encoding/json does, for JavaScript
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
