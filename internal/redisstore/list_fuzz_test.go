package redisstore

import (
	"slices"
	"strings"
	"testing"
)

// FuzzListUnder: whatever keys certmagic stores (they carry names clients sent, through on-demand TLS), List
// answers only keys inside the directory, each once, one level deep unless recursive, every answer a file or a
// directory leading to one, and every file reachable.
func FuzzListUnder(f *testing.F) {
	f.Add("certificates/acme", "a.example/a.example.crt\na.example/a.example.key\nb.example/b.example.crt\na.example0", false)
	f.Add("certificates", "acme/x/y.crt\nacme/x/y.json\nzerossl/z/z.crt", true)
	f.Add("", "last_clean.json\nacme/acct/users/u.json\nocsp/o", false)
	f.Add("a", "//\n/b/\nb//c\n../../x\n./y", true)
	f.Add("a", "//", false)
	f.Fuzz(func(t *testing.T, dir string, lines string, recursive bool) {
		// As Store and List see them.
		dir = clean(dir)
		base := ""
		if dir != "" {
			base = dir + "/"
		}
		var below []string
		for _, l := range strings.Split(lines, "\n") {
			below = append(below, clean(base+l))
		}
		below = append(below, clean("elsewhere/"+lines)) // not under dir unless dir is the root or "elsewhere"
		slices.Sort(below)
		below = slices.Compact(below)
		got := listUnder(dir, below, recursive)

		files := map[string]bool{}
		for _, k := range below {
			if strings.HasPrefix(k, base) && len(k) > len(base) {
				files[k] = true
			}
		}
		seen := map[string]bool{}
		for _, k := range got {
			if seen[k] {
				t.Fatalf("%q listed twice", k)
			}
			seen[k] = true
			if !strings.HasPrefix(k, base) || len(k) == len(base) {
				t.Fatalf("%q listed outside %q", k, dir)
			}
			if !recursive && strings.Contains(k[len(base):], "/") {
				t.Fatalf("%q is more than one level below %q", k, dir)
			}
			if files[k] {
				continue
			}
			isDir := false
			for f := range files {
				isDir = isDir || strings.HasPrefix(f, k+"/")
			}
			if !isDir {
				t.Fatalf("%q is neither a file nor a directory of one", k)
			}
		}
		for f := range files {
			want := f
			if !recursive {
				first, _, _ := strings.Cut(f[len(base):], "/")
				want = base + first
			}
			if !seen[want] {
				t.Fatalf("file %q not reachable: %q missing from %q", f, want, got)
			}
		}
	})
}
