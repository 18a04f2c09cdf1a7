package browser

import (
	"encoding/binary"
	"fmt"
	"io"
)

// maxCutText caps a dropped ClientCutText payload; a longer one closes the stream rather than being skipped forever.
const maxCutText = 1 << 20

// rfbSecurityNone is security type None (RFC 6143 section 7.2.1).
const rfbSecurityNone = 1

// RFB client-to-server message types (RFC 6143 section 7.5).
const (
	rfbSetPixelFormat           = 0
	rfbSetEncodings             = 2
	rfbFramebufferUpdateRequest = 3
	rfbKeyEvent                 = 4
	rfbPointerEvent             = 5
	rfbClientCutText            = 6
	// Extensions noVNC speaks when the server offers them (rfbproto.rst): a viewer may keep the first three,
	// never the last two (XVP asks for a shutdown or reboot; QEMU's message 0 is a key event).
	rfbEnableContinuousUpdates = 150
	rfbClientFence             = 248
	rfbSetDesktopSize          = 251
	rfbXVP                     = 250
	rfbQEMU                    = 255
)

type rfbPhase int

const (
	rfbVersion rfbPhase = iota
	rfbSecurity
	rfbClientInit
	rfbMessages
)

// errRFBViewOnly is a client stream the view-only filter cannot frame or will not carry; its text becomes the
// WebSocket close reason.
type errRFBViewOnly struct{ msg string }

func (e *errRFBViewOnly) Error() string { return e.msg }

// viewOnlyRFB writes a client-to-server RFB byte stream to w, forwarding the handshake and the messages that only ask
// for pixels (SetPixelFormat, SetEncodings, FramebufferUpdateRequest) and dropping input (KeyEvent, PointerEvent,
// ClientCutText). WebSocket frames do not align with RFB messages, so it buffers at most one incomplete message.
// The handshake must be RFB 3.7 or 3.8 with security type None (x11vnc runs -nopw): the client answers with one byte;
// anything else is refused, so the forwarded stream always frames the way the server reads it.
type viewOnlyRFB struct {
	w       io.Writer
	phase   rfbPhase
	buf     []byte
	skip    int // bytes of a dropped ClientCutText still to discard
	dropped int // input messages dropped so far
}

func newViewOnlyRFB(w io.Writer) *viewOnlyRFB { return &viewOnlyRFB{w: w} }

// Write filters p; it reports len(p) once every complete message in it is forwarded or dropped.
func (f *viewOnlyRFB) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if f.skip > 0 {
			k := min(f.skip, len(p))
			f.skip -= k
			p = p[k:]
			continue
		}
		f.buf = append(f.buf, p...)
		p = nil
		if err := f.drain(); err != nil {
			return 0, err
		}
		if f.skip > 0 && len(f.buf) > 0 { // cut text started inside buf: discard from there
			k := min(f.skip, len(f.buf))
			f.skip -= k
			rest := f.buf[k:]
			f.buf = nil
			p = rest
		}
	}
	return n, nil
}

// drain consumes every complete item at the head of buf.
func (f *viewOnlyRFB) drain() error {
	for len(f.buf) > 0 && f.skip == 0 {
		need, forward, err := f.next()
		if err != nil {
			return err
		}
		if need < 0 || len(f.buf) < need {
			return nil // wait for more bytes
		}
		item := f.buf[:need]
		if forward {
			if _, err := f.w.Write(item); err != nil {
				return err
			}
		}
		f.buf = append(f.buf[:0], f.buf[need:]...)
	}
	return nil
}

// next sizes the item at the head of buf: need < 0 means its header is still incomplete.
func (f *viewOnlyRFB) next() (need int, forward bool, err error) {
	switch f.phase {
	case rfbVersion:
		if len(f.buf) < 12 {
			return -1, false, nil
		}
		// Only 3.7 and 3.8 clients choose a security type with one byte; 3.3's server-chosen type would shift the
		// framing below by a byte and let the client's own ClientInit through unchanged.
		if v := string(f.buf[:12]); v != "RFB 003.008\n" && v != "RFB 003.007\n" {
			return 0, false, &errRFBViewOnly{fmt.Sprintf("view-only: RFB version %q not supported (want 003.007 or 003.008)", v)}
		}
		f.phase = rfbSecurity
		return 12, true, nil
	case rfbSecurity:
		// None is the only type whose handshake has no further client bytes (x11vnc runs -nopw and offers only it).
		if f.buf[0] != rfbSecurityNone {
			return 0, false, &errRFBViewOnly{fmt.Sprintf("view-only: security type %d not supported (want None)", f.buf[0])}
		}
		f.phase = rfbClientInit
		return 1, true, nil
	case rfbClientInit:
		f.buf[0] = 1 // shared: a viewer never disconnects the other clients
		f.phase = rfbMessages
		return 1, true, nil
	}
	switch t := f.buf[0]; t {
	case rfbSetPixelFormat:
		return 20, true, nil
	case rfbFramebufferUpdateRequest:
		return 10, true, nil
	case rfbSetEncodings:
		if len(f.buf) < 4 {
			return -1, false, nil
		}
		return 4 + 4*int(binary.BigEndian.Uint16(f.buf[2:4])), true, nil
	case rfbKeyEvent, rfbPointerEvent:
		size := 8
		if t == rfbPointerEvent {
			size = 6
		}
		if len(f.buf) >= size {
			f.dropped++
		}
		return size, false, nil
	case rfbEnableContinuousUpdates:
		return 10, true, nil
	case rfbClientFence:
		if len(f.buf) < 9 {
			return -1, false, nil
		}
		return 9 + int(f.buf[8]), true, nil
	case rfbSetDesktopSize:
		// A viewer has no business resizing everyone's desktop, but the message is well framed: drop it.
		if len(f.buf) < 8 {
			return -1, false, nil
		}
		size := 8 + 16*int(f.buf[6])
		if len(f.buf) >= size {
			f.dropped++
		}
		return size, false, nil
	case rfbXVP:
		if len(f.buf) >= 4 {
			f.dropped++
		}
		return 4, false, nil
	case rfbQEMU:
		if len(f.buf) < 2 {
			return -1, false, nil
		}
		if f.buf[1] != 0 {
			return 0, false, &errRFBViewOnly{fmt.Sprintf("view-only: unknown QEMU message %d", f.buf[1])}
		}
		if len(f.buf) >= 12 {
			f.dropped++
		}
		return 12, false, nil
	case rfbClientCutText:
		if len(f.buf) < 8 {
			return -1, false, nil
		}
		// A negative length is the Extended Clipboard format (noVNC announces its capabilities this way right after
		// connecting): |length| bytes of payload follow either way.
		length := int64(int32(binary.BigEndian.Uint32(f.buf[4:8])))
		if length < 0 {
			length = -length
		}
		if length > maxCutText {
			return 0, false, &errRFBViewOnly{fmt.Sprintf("view-only: clipboard message of %d bytes exceeds %d", length, maxCutText)}
		}
		f.dropped++
		f.buf = append(f.buf[:0], f.buf[8:]...)
		f.skip = int(length)
		return 0, false, nil
	default:
		return 0, false, &errRFBViewOnly{fmt.Sprintf("view-only: unknown RFB message type %d", t)}
	}
}
