package rkernel

import (
	"encoding/hex"
	"strings"
	"testing"
)

func h(s string) string { return hex.EncodeToString([]byte(s)) }

func TestParseResult(t *testing.T) {
	png := "\x89PNG\r\n\x1a\nrest"
	line := strings.Join([]string{"x3", "0", "3", "0", h("[1] 42\n"), h("warn\n"), h("Error: boom"), h(png) + "," + h(png)}, "\t")
	res, id, err := parseResult(line)
	if err != nil || id != "x3" {
		t.Fatalf("%v %q", err, id)
	}
	if res.Success || res.ExecutionCount != 3 || res.Stdout != "[1] 42\n" || res.Stderr != "warn\n" || res.Error == nil ||
		res.Error.EValue != "Error: boom" || len(res.Images) != 2 || res.Images[0] != "iVBORw0KGgpyZXN0" {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	ok, _, err := parseResult(strings.Join([]string{"x4", "1", "4", "1", "", "", "", ""}, "\t"))
	if err != nil || !ok.Success || ok.Error != nil || !ok.TimedOut || len(ok.Images) != 0 {
		t.Fatalf("%+v %v", ok, err)
	}
	for _, bad := range []string{"", "x1\t1", strings.Repeat("\t", 7) + "zz", "x1\t1\tnotanumber\t0\t\t\t\t"} {
		if _, _, err := parseResult(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseResult: whatever the R process writes, parsing never panics.
func FuzzParseResult(f *testing.F) {
	f.Add("x1\t1\t1\t0\t\t\t\t")
	f.Add("x1\t0\t2\t1\t41\t42\t43\t44,45")
	f.Fuzz(func(t *testing.T, line string) {
		_, _, _ = parseResult(line)
	})
}
