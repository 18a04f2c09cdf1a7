package envfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	env := map[string]string{"API_KEY": "secret-key-12345", "GREETING": "hello world", "PROXY": `http://u:p$ &\@h:7890`,
		"QUOTE": "it's", "LINES": "a\nb", "EMPTY": ""}
	get := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	names := []string{"API_KEY", "GREETING", "PROXY", "QUOTE", "LINES", "EMPTY", "MISSING", "BAD-NAME", "1X", ""}
	out := string(Render(names, get))
	for _, want := range []string{"export API_KEY='secret-key-12345'\n", "export QUOTE='it'\\''s'\n", "export EMPTY=''\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("Render lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"MISSING", "BAD-NAME", "1X"} {
		if strings.Contains(out, not) {
			t.Errorf("Render wrote %s:\n%s", not, out)
		}
	}
	// The shell reads every value back as it was.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	f := filepath.Join(t.TempDir(), "env.sh")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		got, err := exec.Command(bash, "-c", `. "$1" && printf %s "${!2}"`, "sh", f, k).Output()
		if err != nil {
			t.Fatalf("sourcing: %v", err)
		}
		if string(got) != v {
			t.Errorf("%s read back as %q, want %q", k, got, v)
		}
	}
}

func TestWrite(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The tenant links the file's name to a file elsewhere: the link is replaced, the target untouched.
	path := filepath.Join(ws, ".bay_env.sh")
	if err := os.Symlink(outside, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(ws, path, []byte("export A='1'\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the env file is not a regular file: %v %v", fi, err)
	}
	for _, bad := range []string{filepath.Join(ws, "sub", "x.sh"), "/etc/x.sh", filepath.Join(ws, "..", "x.sh"), ws} {
		if err := Write(ws, bad, nil); err == nil {
			t.Errorf("Write(%q) was accepted", bad)
		}
	}
	left, _ := filepath.Glob(filepath.Join(ws, ".sandgate-envfile-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
