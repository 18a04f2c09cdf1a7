package execd_test

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/internal/execd"
)

func split(chunks ...string) []string {
	out := []string{}
	l := execd.NewLineSplitter(func(s string) error { out = append(out, s); return nil })
	for _, c := range chunks {
		_ = l.Write([]byte(c))
	}
	_ = l.Flush()
	return out
}

func TestLineSplitter(t *testing.T) {
	cases := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"no final newline", []string{"a\nb"}, []string{"a", "b"}},
		{"empty lines", []string{"\n\na\n"}, []string{"\n", "\n", "a"}},
		{"crlf is one terminator", []string{"a\r\nb\r\n"}, []string{"a", "b"}},
		{"crlf split across writes", []string{"a\r", "\nb"}, []string{"a", "b"}},
		{"lone cr ends a line", []string{"50%\r100%\n"}, []string{"50%", "100%"}},
		{"cr cr", []string{"\r\r"}, []string{"\n", "\n"}},
		{"line across writes", []string{"he", "llo\n"}, []string{"hello"}},
		{"nothing", nil, []string{}},
	}
	for _, tc := range cases {
		if got := split(tc.chunks...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	long := strings.Repeat("é", execd.MaxLineBytes) // 2 bytes each: the cut must fall between characters
	got := split(long + "\n")
	if len(got) != 2 || got[0]+got[1] != long || len(got[0]) > execd.MaxLineBytes || !strings.HasPrefix(got[1], "é") {
		t.Fatalf("long line cut into %d pieces (%d, %d bytes)", len(got), len(got[0]), len(got[1]))
	}
}

// naiveLines is execd's serveLineRange as it reads: ReadBytes('\n'), trim "\r\n" characters, join with "\n".
func naiveLines(content string, lr execd.LineRange) string {
	var out bytes.Buffer
	r := bufio.NewReader(strings.NewReader(content))
	var n, written int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			n++
			if n >= lr.Offset {
				if written > 0 {
					out.WriteByte('\n')
				}
				out.Write(line)
				written++
				if lr.Limit >= 0 && written >= lr.Limit {
					break
				}
			}
		}
		if err != nil {
			break
		}
	}
	return out.String()
}

func TestCopyLines(t *testing.T) {
	content := "one\r\ntwo\n\nfour\r\r\n" + strings.Repeat("x", 200<<10) + "\r\r\nsix\rstill six\nseven"
	for _, lr := range []execd.LineRange{{1, -1}, {2, 3}, {5, 1}, {6, -1}, {7, 5}, {8, 1}, {1, 1}} {
		var got bytes.Buffer
		if err := execd.CopyLines(&got, strings.NewReader(content), lr); err != nil {
			t.Fatal(err)
		}
		if want := naiveLines(content, lr); got.String() != want {
			t.Fatalf("%+v: %d bytes %q…, want %d bytes", lr, got.Len(), got.String()[:min(40, got.Len())], len(want))
		}
	}
}

func TestParseLineRange(t *testing.T) {
	cases := []struct {
		offset, limit string
		want          execd.LineRange
		ok            bool
	}{
		{"", "", execd.LineRange{Offset: 1, Limit: -1}, true},
		{"3", "", execd.LineRange{Offset: 3, Limit: -1}, true},
		{"", "2", execd.LineRange{Offset: 1, Limit: 2}, true},
		{"0", "", execd.LineRange{}, false},
		{"", "0", execd.LineRange{}, false},
		{"-1", "", execd.LineRange{}, false},
		{"1.5", "", execd.LineRange{}, false},
		{"99999999999999999999", "", execd.LineRange{}, false},
	}
	for _, tc := range cases {
		got, err := execd.ParseLineRange(tc.offset, tc.limit)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("%q %q: %+v %v", tc.offset, tc.limit, got, err)
		}
	}
}

func TestExpandPath(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"HOME": "/home/u", "W": "/workspace"}[k]
		return v, ok
	}
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"rel/x", "rel/x", true},
		{"~", "/home/u", true},
		{"~/.npmrc", "/home/u/.npmrc", true},
		{"~other/x", "~other/x", true}, // not a home reference: stays, and resolves under the workspace
		{"$W/a", "/workspace/a", true},
		{"${W}/a", "/workspace/a", true},
		{"$NOPE/a", "", false},
	}
	for _, tc := range cases {
		got, err := execd.ExpandPath(tc.in, "/home/u", env)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %q %v", tc.in, got, err)
		}
	}
}
