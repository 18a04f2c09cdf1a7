package execd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/execd"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// Every parser of tenant input on the execd API has a fuzz target here; the seeds run with go test.

func FuzzParseUploadMetadata(f *testing.F) {
	for _, s := range []string{`{"path":"/workspace/a","mode":644}`, `{"path":"~/.npmrc"}`, `{"path":"a","owner":"sandbox","group":"sandbox","mode":755}`,
		`{}`, `{"path":""}`, `{"path":"a","mode":-1}`, `{"path":"a","mode":99999999999}`, `[]`, `{"path":1}`, "", "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := execd.ParseUploadMetadata(b)
		if err != nil {
			return
		}
		if u.Meta.Path == "" {
			t.Fatal("accepted an empty path")
		}
		if u.Mode != nil && *u.Mode&^os.ModePerm != 0 {
			t.Fatalf("mode %v beyond permission bits", *u.Mode)
		}
	})
}

func FuzzSearchPattern(f *testing.F) {
	for _, s := range [][2]string{{"*.go", "a.go"}, {"**", "x"}, {"{a,b}*", "bc"}, {"[a-", "a"}, {"\\", "x"}, {"[!a]?", "bc"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := execd.CheckPattern(pattern)
		if err != nil {
			return
		}
		_ = doublestar.MatchUnvalidated(p, name) // a validated pattern never panics on any name
	})
}

func FuzzCopyLines(f *testing.F) {
	f.Add("one\r\ntwo\n\nfour\r\r\nfive", int64(2), int64(3))
	f.Add("\r\r\r\n\n", int64(1), int64(-1))
	f.Add("", int64(1), int64(1))
	f.Add(strings.Repeat("y", 70<<10)+"\r\nz", int64(1), int64(-1))
	f.Fuzz(func(t *testing.T, content string, offset, limit int64) {
		lr := execd.LineRange{Offset: max(offset, 1), Limit: max(limit, -1)}
		if lr.Limit == 0 {
			lr.Limit = 1
		}
		var got bytes.Buffer
		if err := execd.CopyLines(&got, strings.NewReader(content), lr); err != nil {
			t.Fatal(err)
		}
		if want := naiveLines(content, lr); got.String() != want {
			t.Fatalf("%+v over %q: %q, want %q", lr, content, got.String(), want)
		}
	})
}

func FuzzParseLineRange(f *testing.F) {
	for _, s := range [][2]string{{"1", "10"}, {"", ""}, {"0", "1"}, {"-5", "x"}, {"9223372036854775807", "9223372036854775808"}, {" 1", "1 "}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, offset, limit string) {
		lr, err := execd.ParseLineRange(offset, limit)
		if err != nil {
			return
		}
		if lr.Offset < 1 || (lr.Limit != -1 && lr.Limit < 1) {
			t.Fatalf("%q %q gave %+v", offset, limit, lr)
		}
	})
}

// FuzzLineSplitter: where the stream is cut into writes never changes the lines (below the long-line cap).
func FuzzLineSplitter(f *testing.F) {
	f.Add("a\r\nb\rc\n\nd", 2)
	f.Add("\r\n\r\n", 1)
	f.Add("héllo\nwörld", 2)
	f.Fuzz(func(t *testing.T, s string, cut int) {
		if cut < 0 || cut > len(s) {
			cut = len(s) / 2
		}
		whole, parts := split(s), split(s[:cut], s[cut:])
		if !slices.Equal(whole, parts) {
			t.Fatalf("%q cut at %d: %q vs %q", s, cut, whole, parts)
		}
	})
}

// FuzzConfinedPath: whatever a tenant names, with ~, variables, dots and symlinks, the resolved path is inside the
// workspace or home, or refused.
func FuzzConfinedPath(f *testing.F) {
	base := f.TempDir()
	ws, home := filepath.Join(base, "ws"), filepath.Join(base, "home")
	for _, d := range []string{filepath.Join(ws, "sub"), home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "sub", "out")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(home, "up")); err != nil {
		f.Fatal(err)
	}
	root, err := workspace.New(ws)
	if err != nil {
		f.Fatal(err)
	}
	if root, err = root.WithAlso(home); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"a", "~/.npmrc", "~", "~/../x", "$HOME/x", "${X}/../..", "sub/out/passwd", "~/up/ws/a", "/etc/passwd",
		ws + "/../home/x", home + "2/x", "../" + filepath.Base(base), "a\x00b", "~/" + strings.Repeat("../", 20) + "etc"} {
		f.Add(s)
	}
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"HOME": home, "X": ws + "/sub"}[k]
		return v, ok
	}
	f.Fuzz(func(t *testing.T, p string) {
		x, err := execd.ExpandPath(p, home, env)
		if err != nil {
			return
		}
		abs, err := root.Resolve(x)
		if err != nil {
			return
		}
		rws, _ := filepath.EvalSymlinks(ws)
		rhome, _ := filepath.EvalSymlinks(home)
		for _, d := range []string{rws, rhome} {
			if abs == d || strings.HasPrefix(abs, d+"/") {
				return
			}
		}
		t.Fatalf("%q resolved to %q, outside %s and %s", p, abs, ws, home)
	})
}

// FuzzAppendLineEvent: the hand-made encoding of line events decodes to what json.Marshal's would.
func FuzzAppendLineEvent(f *testing.F) {
	for _, s := range []string{"plain", "quote \" back \\ slash", "\x00\x01\x1f\t", "héllo ☺", "\xff\xfe bad", "\u2028\u2029", "<&>", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		b := execd.AppendLineEvent(nil, agentapi.ExecdEventStdout, text, 42)
		if !bytes.HasSuffix(b, []byte("}\n\n")) || bytes.Count(b, []byte("\n")) != 2 {
			t.Fatalf("framing %q", b)
		}
		var got, want agentapi.ExecdEvent
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		ref, _ := json.Marshal(agentapi.ExecdEvent{Type: agentapi.ExecdEventStdout, Text: text, Timestamp: 42})
		_ = json.Unmarshal(ref, &want)
		if got.Type != want.Type || got.Text != want.Text || got.Timestamp != want.Timestamp {
			t.Fatalf("%q: %+v, want %+v", text, got, want)
		}
	})
}
