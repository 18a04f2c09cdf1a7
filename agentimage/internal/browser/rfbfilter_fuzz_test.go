package browser

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// FuzzViewOnlyRFB feeds arbitrary client bytes, cut into arbitrary frames, through the view-only filter. The filter
// must never panic, must forward the same bytes however the stream is framed, and what it forwards must read, with
// the server's framing, as the handshake (shared forced) followed only by whole messages a viewer may send.
func FuzzViewOnlyRFB(f *testing.F) {
	seeds := [][]byte{
		rfbHandshake,
		cat(rfbHandshake, pixfmt, encodings, update),
		cat(rfbHandshake, key, pointer, update, cut, update),
		cat(rfbHandshake, extendedCut, update),
		cat(rfbHandshake, extendedOversize),
		cat(rfbHandshake, oversize),
		cat(rfbHandshake, continuous, fence, update),
		cat(rfbHandshake, desktopSize, xvp, qemuKey, update),
		cat(rfbHandshake, []byte{255, 1, 0, 0}),
		cat(rfbHandshake, update, []byte{7, 0, 0}),
		cat([]byte("RFB 003.007\n"), []byte{1, 0}, update),
		append([]byte("RFB 003.003\n"), 0, 4, 1, 0, 0, 0, 0, 0, 0x61),
		append([]byte("RFB 003.008\n"), 2, 0),
		// A dropped message whose length field hides an input message inside an allowed one's framing.
		cat(rfbHandshake, []byte{6, 0, 0, 0, 0, 0, 0, 8}, key, key),
		cat(rfbHandshake, []byte{2, 0, 0, 0xff}),
	}
	for _, s := range seeds {
		f.Add(s, []byte{})
		f.Add(s, []byte{1, 5, 13, 3, 2, 7})
	}
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		whole, wholeErr := runViewOnly(stream, nil)
		split, splitErr := runViewOnly(stream, cuts)
		if !bytes.Equal(whole, split) {
			t.Fatalf("framing changed what was forwarded:\nwhole %v\nsplit %v", whole, split)
		}
		if (wholeErr == nil) != (splitErr == nil) {
			t.Fatalf("framing changed the outcome: whole %v, split %v", wholeErr, splitErr)
		}
		for _, err := range []error{wholeErr, splitErr} {
			var refused *errRFBViewOnly
			if err != nil && !errors.As(err, &refused) {
				t.Fatalf("error of type %T: %v", err, err)
			}
		}
		if err := checkViewerStream(whole); err != nil {
			t.Fatalf("forwarded %v: %v", whole, err)
		}
	})
}

// runViewOnly writes stream through a fresh filter in frames whose sizes come from cuts (nil: one frame).
func runViewOnly(stream, cuts []byte) ([]byte, error) {
	var out bytes.Buffer
	v := newViewOnlyRFB(&out)
	for i := 0; len(stream) > 0; i++ {
		n := len(stream)
		if cuts != nil {
			n = 1
			if len(cuts) > 0 {
				n = int(cuts[i%len(cuts)])%17 + 1
			}
			n = min(n, len(stream))
		}
		if _, err := v.Write(stream[:n]); err != nil {
			return out.Bytes(), err
		}
		stream = stream[n:]
	}
	return out.Bytes(), nil
}

// checkViewerStream reads b as an RFB server would: the version, security None, a shared ClientInit, then whole
// messages of the types a view-only client may send. It is written apart from the filter so a framing bug in one
// is not repeated in the other.
func checkViewerStream(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) < 12 {
		return fmt.Errorf("a partial version (%d bytes) was forwarded", len(b))
	}
	if v := string(b[:12]); v != "RFB 003.008\n" && v != "RFB 003.007\n" {
		return fmt.Errorf("version %q forwarded", v)
	}
	b = b[12:]
	if len(b) > 0 && b[0] != 1 {
		return fmt.Errorf("security type %d forwarded", b[0])
	}
	if len(b) > 1 && b[1] != 1 {
		return fmt.Errorf("ClientInit shared flag %d forwarded", b[1])
	}
	if len(b) <= 2 {
		return nil
	}
	b = b[2:]
	for len(b) > 0 {
		var size int
		switch b[0] {
		case 0: // SetPixelFormat
			size = 20
		case 2: // SetEncodings
			if len(b) < 4 {
				return fmt.Errorf("a partial SetEncodings header was forwarded")
			}
			size = 4 + 4*int(binary.BigEndian.Uint16(b[2:4]))
		case 3, 150: // FramebufferUpdateRequest, EnableContinuousUpdates
			size = 10
		case 248: // ClientFence
			if len(b) < 9 {
				return fmt.Errorf("a partial ClientFence header was forwarded")
			}
			size = 9 + int(b[8])
		default:
			return fmt.Errorf("message type %d forwarded", b[0])
		}
		if len(b) < size {
			return fmt.Errorf("a partial message of type %d was forwarded (%d of %d bytes)", b[0], len(b), size)
		}
		b = b[size:]
	}
	return nil
}
