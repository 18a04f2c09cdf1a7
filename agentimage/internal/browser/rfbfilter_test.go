package browser

import (
	"bytes"
	"errors"
	"testing"
)

// Client messages as noVNC and hostile clients send them.
var (
	rfbHandshake     = append([]byte("RFB 003.008\n"), 1, 0) // version, security None, ClientInit exclusive
	rfbShared        = append([]byte("RFB 003.008\n"), 1, 1)
	pixfmt           = append([]byte{0, 0, 0, 0}, make([]byte, 16)...)
	encodings        = []byte{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21}
	update           = []byte{3, 1, 0, 0, 0, 0, 4, 0, 3, 0}
	key              = []byte{4, 1, 0, 0, 0, 0, 0, 0x61}
	pointer          = []byte{5, 1, 0, 10, 0, 20}
	cut              = []byte{6, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'}
	oversize         = []byte{6, 0, 0, 0, 0, 0x10, 0, 1}
	extendedCut      = []byte{6, 0, 0, 0, 0xff, 0xff, 0xff, 0xf8, 1, 0, 0, 0x1f, 0, 0, 0x10, 0} // noVNC's caps announcement: length -8
	extendedOversize = []byte{6, 0, 0, 0, 0xff, 0xef, 0xff, 0xff}
	continuous       = []byte{150, 1, 0, 0, 0, 0, 4, 0, 3, 0}
	fence            = []byte{248, 0, 0, 0, 0, 0, 0, 3, 2, 'x', 'y'}
	desktopSize      = append([]byte{251, 0, 4, 0, 3, 0, 1, 0}, make([]byte, 16)...)
	xvp              = []byte{250, 0, 1, 2}
	qemuKey          = []byte{255, 0, 0, 1, 0, 0, 0, 0x61, 0, 0, 0, 30}
)

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestViewOnlyRFB(t *testing.T) {
	handshake, shared := rfbHandshake, rfbShared
	tests := []struct {
		name     string
		frames   [][]byte
		want     []byte
		dropped  int
		errorHas string
	}{
		{"handshake forces shared", [][]byte{handshake}, shared, 0, ""},
		{"forwards pixel requests", [][]byte{cat(handshake, pixfmt, encodings, update)}, cat(shared, pixfmt, encodings, update), 0, ""},
		{"drops key", [][]byte{cat(handshake, key, update)}, cat(shared, update), 1, ""},
		{"drops pointer", [][]byte{cat(handshake, pointer, update)}, cat(shared, update), 1, ""},
		{"drops cut text", [][]byte{cat(handshake, cut, update)}, cat(shared, update), 1, ""},
		{"several in one frame", [][]byte{cat(handshake, key, pointer, update, cut, update)}, cat(shared, update, update), 3, ""},
		{"split across frames", [][]byte{handshake[:5], handshake[5:13], cat(handshake[13:], encodings[:3]), encodings[3:], key[:2], cat(key[2:], update[:4]), update[4:]}, cat(shared, encodings, update), 1, ""},
		{"cut text split", [][]byte{handshake, cut[:6], cut[6:9], cat(cut[9:], update)}, cat(shared, update), 1, ""},
		{"drops extended clipboard (negative length)", [][]byte{cat(handshake, extendedCut[:10]), cat(extendedCut[10:], update)}, cat(shared, update), 1, ""},
		{"oversize extended clipboard", [][]byte{cat(handshake, extendedOversize)}, shared, 0, "exceeds"},
		{"oversize cut text", [][]byte{cat(handshake, oversize)}, shared, 0, "exceeds"},
		{"forwards continuous updates and fences", [][]byte{cat(handshake, continuous, fence[:5]), cat(fence[5:], update)}, cat(shared, continuous, fence, update), 0, ""},
		{"drops resize, XVP and QEMU keys", [][]byte{cat(handshake, desktopSize, xvp, qemuKey[:3]), cat(qemuKey[3:], update)}, cat(shared, update), 3, ""},
		{"unknown QEMU message", [][]byte{cat(handshake, []byte{255, 1, 0, 0})}, shared, 0, "unknown QEMU message 1"},
		{"unknown type", [][]byte{cat(handshake, update, []byte{7, 0, 0})}, cat(shared, update), 0, "unknown RFB message type 7"},
		{"RFB 3.3 refused", [][]byte{append([]byte("RFB 003.003\n"), 0, 4)}, nil, 0, "RFB version"},
		{"3.7 accepted", [][]byte{cat([]byte("RFB 003.007\n"), []byte{1, 0}, update)}, cat([]byte("RFB 003.007\n"), []byte{1, 1}, update), 0, ""},
		{"security other than None refused", [][]byte{append([]byte("RFB 003.008\n"), 2, 0)}, []byte("RFB 003.008\n"), 0, "security type 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := newViewOnlyRFB(&out)
			var err error
			for _, fr := range tc.frames {
				if _, err = f.Write(fr); err != nil {
					break
				}
			}
			var refused *errRFBViewOnly
			switch {
			case tc.errorHas == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.errorHas != "" && (!errors.As(err, &refused) || !bytes.Contains([]byte(err.Error()), []byte(tc.errorHas))):
				t.Fatalf("err = %v, want %q", err, tc.errorHas)
			}
			if !bytes.Equal(out.Bytes(), tc.want) {
				t.Fatalf("forwarded %v, want %v", out.Bytes(), tc.want)
			}
			if f.dropped != tc.dropped {
				t.Fatalf("dropped = %d, want %d", f.dropped, tc.dropped)
			}
		})
	}
}
