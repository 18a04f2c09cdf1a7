package mirrors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func writeOSRelease(t *testing.T, id, codename string) string {
	p := filepath.Join(t.TempDir(), "os-release")
	if err := os.WriteFile(p, []byte("ID="+id+"\nVERSION_CODENAME="+codename+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyWritesFastGPTFiles(t *testing.T) {
	home := t.TempDir()
	apt := filepath.Join(t.TempDir(), "00-fastgpt-mirror.sources")
	m := agentapi.Mirrors{NPMRegistry: "https://npm.example/", PyPIIndexURL: "http://pypi.example:8080/simple", AptMirror: "http://apt.example/debian"}
	rep := Apply(home, m, Options{OSRelease: writeOSRelease(t, "debian", "bookworm"), AptFile: apt})
	for path, want := range map[string]string{
		".npmrc":               "registry=https://npm.example/\n",
		".yarnrc":              "registry \"https://npm.example/\"\n",
		".yarnrc.yml":          "npmRegistryServer: \"https://npm.example/\"\n",
		".bunfig.toml":         "[install]\nregistry = \"https://npm.example/\"\n",
		".pip/pip.conf":        "[global]\nindex-url = http://pypi.example:8080/simple\ntrusted-host = pypi.example\n",
		".config/pip/pip.conf": "[global]\nindex-url = http://pypi.example:8080/simple\ntrusted-host = pypi.example\n",
		".config/uv/uv.toml":   "default-index = \"http://pypi.example:8080/simple\"\nallow-insecure-host = [\"pypi.example\"]\n",
	} {
		if b, err := os.ReadFile(filepath.Join(home, path)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", path, b, err, want)
		}
	}
	b, err := os.ReadFile(apt)
	if err != nil || rep.Apt != "written" || !strings.Contains(string(b), "Suites: bookworm bookworm-updates bookworm-backports\n") ||
		!strings.Contains(string(b), "debian-archive-keyring.gpg") {
		t.Fatalf("debian apt source %q %v %+v", b, err, rep)
	}
	if state, _ := os.ReadFile(filepath.Join(home, StateFile)); !strings.Contains(string(state), `"sandboxPackageMirrors": "`+hash(m)+`"`) {
		t.Fatalf("state %s", state)
	}
	// Idempotent: the same settings again leave a user's edit alone.
	_ = os.WriteFile(filepath.Join(home, ".npmrc"), []byte("registry=mine\n"), 0o644)
	rep = Apply(home, m, Options{OSRelease: writeOSRelease(t, "debian", "bookworm"), AptFile: apt})
	if b, _ := os.ReadFile(filepath.Join(home, ".npmrc")); string(b) != "registry=mine\n" || rep.Apt != "unchanged" || len(rep.Files) != 0 {
		t.Fatalf("second apply: %q %+v", b, rep)
	}
	// New settings rewrite.
	m.NPMRegistry = "https://npm2.example/"
	Apply(home, m, Options{OSRelease: writeOSRelease(t, "debian", "bookworm"), AptFile: apt})
	if b, _ := os.ReadFile(filepath.Join(home, ".npmrc")); string(b) != "registry=https://npm2.example/\n" {
		t.Fatalf("changed settings not applied: %q", b)
	}
}

func TestAptUbuntuAndReadOnly(t *testing.T) {
	for _, tc := range []struct {
		name, id, codename, want string
		readOnly                 bool
	}{
		{"ubuntu", "ubuntu", "noble", "written", false},
		{"read-only etc", "debian", "bookworm", "skipped: ", true},
		{"unknown system", "alpine", "", "skipped: no apt source", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			apt := filepath.Join(dir, "sources.list.d", "00-fastgpt-mirror.sources")
			if tc.readOnly {
				if os.Geteuid() == 0 {
					apt = "/proc/sandgate-not-writable/00.sources" // root ignores permission bits
				} else if err := os.Chmod(dir, 0o500); err != nil {
					t.Fatal(err)
				}
			}
			rep := Apply(t.TempDir(), agentapi.Mirrors{AptMirror: "http://apt.example/x"}, Options{OSRelease: writeOSRelease(t, tc.id, tc.codename), AptFile: apt})
			if !strings.HasPrefix(rep.Apt, tc.want) {
				t.Fatalf("apt %q, want prefix %q", rep.Apt, tc.want)
			}
			if tc.id == "ubuntu" {
				b, _ := os.ReadFile(apt)
				if !strings.Contains(string(b), "Suites: noble noble-updates noble-backports noble-security\nComponents: main restricted universe multiverse\n") {
					t.Fatalf("ubuntu source %q", b)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		m  agentapi.Mirrors
		ok bool
	}{
		{agentapi.Mirrors{NPMRegistry: "https://r.example/"}, true},
		{agentapi.Mirrors{}, true},
		{agentapi.Mirrors{PyPIIndexURL: "ftp://x/"}, false},
		{agentapi.Mirrors{AptMirror: "http://x/\nSigned-By: evil"}, false},
		{agentapi.Mirrors{NPMRegistry: "relative/path"}, false},
	} {
		if err := Validate(tc.m); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.m, err)
		}
	}
}
