package agentapi

import (
	"strings"
	"testing"
)

// FuzzDependenciesValidate: whatever a tenant names as a dependency, what Validate accepts can reach an installer's
// command line (pip, npm, apt) or an R vector without being read as an option, a URL, a path, R code or a second
// word.
func FuzzDependenciesValidate(f *testing.F) {
	for _, seed := range [][3]string{
		{"r", "R6", ">=2.5"}, {"r", "data.table", "1.14-8"}, {"r", "a);system('id');(", ""}, {"r", "--repos=http://x", "*"},
		{"python", "requests", "2.31.0"}, {"python", "uvicorn[standard]", ">=0.20,<1"}, {"python", "-r/etc/passwd", ""},
		{"node", "@types/node", "^20"}, {"node", "x", "file:/etc"}, {"apt", "libpq-dev", ""}, {"apt", "-o=APT::x", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, kind, name, version string) {
		var d Dependencies
		switch kind {
		case "r":
			d.R = map[string]string{name: version}
		case "python":
			d.Python = map[string]string{name: version}
		case "node":
			d.Node = map[string]string{name: version}
		case "apt":
			d.Apt = []string{name}
		default:
			return
		}
		if d.Validate() != nil {
			return
		}
		if strings.HasPrefix(name, "-") || strings.ContainsAny(name, " \t\n\"'`;$(){}\\") || kind != "apt" && strings.Contains(name, ":") {
			t.Fatalf("%s name %q accepted", kind, name)
		}
		if kind != "apt" && strings.ContainsAny(version, "\t\n\"'`;$(){}\\/:") {
			t.Fatalf("%s version %q accepted", kind, version)
		}
		if kind == "r" && strings.ContainsAny(version, " ,") {
			t.Fatalf("r version %q accepted: it must stay one argument", version)
		}
	})
}
