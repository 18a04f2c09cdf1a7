package agentapi

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseCursor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Cursor
		ok   bool
	}{
		{"", Cursor{}, true},
		{"0", Cursor{}, true},
		{"12", Cursor{12, 12}, true},
		{"12:3", Cursor{12, 3}, true},
		{" 5:0 ", Cursor{5, 0}, true},
		{"-1", Cursor{}, false},
		{"1:x", Cursor{}, false},
		{"a", Cursor{}, false},
	} {
		got, err := ParseCursor(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseCursor(%q) = %v, %v", tc.in, got, err)
		}
		if tc.ok && tc.in != "" {
			back, err := ParseCursor(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %v: %v %v", got, back, err)
			}
		}
	}
}

func TestEncodeData(t *testing.T) {
	for _, in := range []string{"", "plain", "héllo €", "\xff\x00bin", "cut \xe2\x82"} {
		s, enc := EncodeData([]byte(in))
		back, err := DecodeData(s, enc)
		if err != nil || string(back) != in {
			t.Errorf("%q: %q %s -> %q %v", in, s, enc, back, err)
		}
	}
	if _, err := DecodeData("x", "rot13"); err == nil {
		t.Error("unknown encoding accepted")
	}
}

func TestReadSSE(t *testing.T) {
	stream := ": comment\n\nevent: stdout\nid: 3:0\ndata: {\"data\":\"abc\",\"encoding\":\"utf8\",\"offset\":0}\n\n" +
		"event: end\r\nid: 3:0\r\ndata: {\"id\":\"p\",\"status\":\"exited\",\"exit_code\":0}\r\n\r\n" +
		"event: stdout\ndata: {\"da"
	r := bufio.NewReader(strings.NewReader(stream))
	ev, err := ReadSSE(r)
	if err != nil || ev.Event != EventStdout || ev.ID != "3:0" || ev.Chunk.Data != "abc" {
		t.Fatalf("%+v %v", ev, err)
	}
	ev, err = ReadSSE(r)
	if err != nil || ev.Event != EventEnd || ev.Process.Status != StatusExited || *ev.Process.ExitCode != 0 {
		t.Fatalf("%+v %v", ev, err)
	}
	if _, err = ReadSSE(r); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut event: want ErrUnexpectedEOF, got %v", err)
	}
	if _, err = ReadSSE(bufio.NewReader(strings.NewReader(""))); err != io.EOF {
		t.Fatalf("empty: want EOF, got %v", err)
	}
}
