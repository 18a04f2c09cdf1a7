package codeinterp

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestCompleteUTF8(t *testing.T) {
	euro := []byte("€") // e2 82 ac
	tests := []struct {
		name string
		in   []byte
		want int
	}{
		{"empty", nil, 0},
		{"ascii", []byte("abc"), 3},
		{"whole character", append([]byte("a"), euro...), 4},
		{"one byte of three", append([]byte("a"), euro[:1]...), 1},
		{"two bytes of three", append([]byte("a"), euro[:2]...), 1},
		{"invalid byte goes out", []byte{'a', 0xff}, 2},
		{"stray continuation goes out", []byte{'a', 0x82}, 2},
	}
	for _, tc := range tests {
		if got := completeUTF8(tc.in); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestOutboxKeepsCharactersWhole(t *testing.T) {
	o := newOutbox()
	o.add(lineStdout, []byte("a\xe2\x82"))
	o.add(lineStderr, []byte("err"))
	first := o.take(false)
	if len(first) != 2 || string(first[0].data) != "a" || first[1].stream != lineStderr {
		t.Fatalf("first take %q", first)
	}
	o.add(lineStdout, []byte("\xac!"))
	if got := o.take(false); len(got) != 1 || string(got[0].data) != "€!" {
		t.Fatalf("second take %q", got)
	}
}

// TestLineWriterKeepalive: a silent stream gets keepalive lines, each a whole JSON line.
func TestLineWriterKeepalive(t *testing.T) {
	pr, pw := io.Pipe()
	lw := newLineWriter(pw)
	stop := make(chan struct{})
	defer close(stop)
	go lw.keepalive(20*time.Millisecond, stop)
	sc := bufio.NewScanner(pr)
	for range 2 {
		if !sc.Scan() {
			t.Fatal(sc.Err())
		}
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l["type"] != lineKeepalive {
			t.Fatalf("%s: %v", sc.Bytes(), err)
		}
	}
	pr.Close()
	// After the client left, nothing more is written and send reports it.
	if err := lw.send(map[string]string{"type": lineEnd}); err == nil {
		t.Fatal("send after the reader closed succeeded")
	}
}

// TestPumpJoinsALine: a line written in pieces (Python writes print's newline apart) goes out as one stdout line;
// stderr between keeps its place.
func TestPumpJoinsALine(t *testing.T) {
	pr, pw := io.Pipe()
	lw := newLineWriter(pw)
	o := newOutbox()
	o.linger = time.Hour // only the end of the cell lets a line's start out alone here
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() { o.pump(lw, done); close(finished) }()
	var got []string
	read := func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var l textLine
			_ = json.Unmarshal(sc.Bytes(), &l)
			got = append(got, l.Type+":"+l.Text)
		}
	}
	readDone := make(chan struct{})
	go func() { read(); close(readDone) }()
	o.add(lineStdout, []byte("doub"))
	o.add(lineStdout, []byte("ling"))
	o.add(lineStdout, []byte("\nnext"))
	o.add(lineStderr, []byte("warn\n"))
	o.add(lineStdout, []byte(" tail"))
	close(done)
	<-finished
	pw.Close()
	<-readDone
	want := "stdout:doubling\n|stdout:next|stderr:warn\n|stdout: tail"
	if j := strings.Join(got, "|"); j != want {
		t.Fatalf("got %q, want %q", j, want)
	}
}
