package pykernel

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestExecStream: a cell's output reaches the sink while the cell still runs (the cell waits for a file the sink
// writes on seeing the first line), and the trailing value's rich representations come back by MIME type.
func TestExecStream(t *testing.T) {
	k := newTestKernel(t)
	flag := filepath.Join(t.TempDir(), "go")
	code := "import os, time\nprint('first', flush=True)\nfor _ in range(3000):\n    if os.path.exists(" + strconv.Quote(flag) + "): break\n    time.sleep(0.01)\nprint('second')\n" +
		"class T:\n    def _repr_html_(self): return '<b>t</b>'\n    def _repr_png_(self): return b'\\x89PNG'\n    def __repr__(self): return 'T()'\nT()"
	var mu sync.Mutex
	var got strings.Builder
	res, err := k.ExecStream(context.Background(), code, 0, func(stream string, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		got.Write(p)
		if stream == "stdout" && strings.Contains(got.String(), "first\n") {
			_ = os.WriteFile(flag, nil, 0o600)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "first\nsecond\n" || res.Stdout != "first\nsecond\n" {
		t.Fatalf("streamed %q, result %+v", got.String(), res.PythonExecResult)
	}
	if deref(res.Result) != "T()" || res.Formats["text/html"] != "<b>t</b>" || res.Formats["image/png"] != "iVBORw==" {
		t.Fatalf("result %v formats %v", deref(res.Result), res.Formats)
	}
}

func TestMarkerStart(t *testing.T) {
	marker := []byte("\x1e<end>\x1e")
	for in, want := range map[string]int{"abc": 0, "abc\x1e": 1, "abc\x1e<en": 4, "\x1e<end>": 6, "": 0, "<end>": 0} {
		if got := markerStart([]byte(in), marker); got != want {
			t.Errorf("%q: %d, want %d", in, got, want)
		}
	}
}
