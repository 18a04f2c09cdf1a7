package docker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

func TestIdentityFiles(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/bash\nnode:x:1000:1000::/home/node:/bin/sh\nsandbox:x:65532:65532::/home/sandbox:/bin/bash\nshipyard:x:4242:4242::/x:/bin/sh\n")
	group := []byte("root:x:0:\nnode:x:1000:\nsandbox:x:65532:\n")
	p := sandboxes.Profile{User: &sandboxes.SandboxUser{Name: "shipyard", UID: 1000}, Home: "/workspace"}
	pw, gr := IdentityFiles(p, passwd, group)
	wantPw := "root:x:0:0:root:/root:/bin/bash\nsandbox:x:65532:65532::/home/sandbox:/bin/bash\nshipyard:x:1000:1000::/workspace:/bin/bash\n"
	if string(pw) != wantPw {
		t.Errorf("passwd:\n%s\nwant:\n%s", pw, wantPw)
	}
	if wantGr := "root:x:0:\nsandbox:x:65532:\nshipyard:x:1000:\n"; string(gr) != wantGr {
		t.Errorf("group:\n%s\nwant:\n%s", gr, wantGr)
	}
	// Without a user the image's files stand.
	if pw, _ := IdentityFiles(sandboxes.Profile{}, passwd, group); string(pw) != string(passwd) {
		t.Errorf("passwd changed without a user")
	}
}

func TestWriteIdentityByContent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "_identity")
	p := sandboxes.Profile{User: &sandboxes.SandboxUser{Name: "shipyard", UID: 1000}}
	ident := imageIdentity{passwd: []byte("root:x:0:0::/root:/bin/bash\n"), group: []byte("root:x:0:\n")}
	pw1, gr1, err := writeIdentity(dir, p, ident)
	if err != nil {
		t.Fatal(err)
	}
	pw2, _, err := writeIdentity(dir, p, ident)
	if err != nil || pw2 != pw1 {
		t.Fatalf("the same content got another file: %s, %s (%v)", pw1, pw2, err)
	}
	p.User.UID = 1001
	pw3, _, err := writeIdentity(dir, p, ident)
	if err != nil || pw3 == pw1 {
		t.Fatalf("another user shares the file: %s (%v)", pw3, err)
	}
	for _, f := range []string{pw1, gr1, pw3} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v %v", f, fi, err)
		}
	}
	if b, _ := os.ReadFile(pw1); !strings.HasSuffix(string(b), "shipyard:x:1000:1000::/home/sandbox:/bin/bash\n") {
		t.Errorf("passwd file: %q", b)
	}
}

func TestHostConfigShip(t *testing.T) {
	spec := sandboxes.ContainerSpec{Volume: "v", Network: "bridge", Profile: sandboxes.Profile{
		User: &sandboxes.SandboxUser{Name: "shipyard", UID: 1000}, HostAliases: []string{"ship", "gull"}}}
	hc, err := HostConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hc.ExtraHosts, []string{"ship:127.0.0.1", "gull:127.0.0.1"}) {
		t.Errorf("ExtraHosts = %v", hc.ExtraHosts)
	}
	if opts := hc.Tmpfs[sandboxes.SandboxHome]; !strings.Contains(opts, "uid=1000,gid=1000") {
		t.Errorf("HOME's tmpfs is not the user's: %s", opts)
	}
	hc, _ = HostConfig(sandboxes.ContainerSpec{Volume: "v", Network: "bridge"})
	if len(hc.ExtraHosts) != 0 || !strings.Contains(hc.Tmpfs[sandboxes.SandboxHome], "uid=65532,gid=65532") {
		t.Errorf("a profile without Ship options changed: %v %s", hc.ExtraHosts, hc.Tmpfs[sandboxes.SandboxHome])
	}
}

// FuzzIdentityFiles: whatever an image's passwd and group hold, the files made from them name the profile's user
// once, on their last line, with its own id and home, and keep no other line of that name or id.
func FuzzIdentityFiles(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\nshipyard:x:0:0::/:/bin/sh\n"), []byte("root:x:0:\nx:x:1000:\n"))
	f.Add([]byte("no colons\n\n:::\nshipyard"), []byte(""))
	f.Fuzz(func(t *testing.T, passwd, group []byte) {
		if len(passwd) > maxIdentityFile || len(group) > maxIdentityFile {
			return
		}
		p := sandboxes.Profile{User: &sandboxes.SandboxUser{Name: "shipyard", UID: 1000}, Home: "/workspace"}
		pw, gr := IdentityFiles(p, passwd, group)
		for _, c := range []struct {
			file []byte
			last string
		}{{pw, p.Passwd()}, {gr, "shipyard:x:1000:"}} {
			lines := strings.Split(strings.TrimSuffix(string(c.file), "\n"), "\n")
			if lines[len(lines)-1] != c.last {
				t.Fatalf("last line %q, want %q", lines[len(lines)-1], c.last)
			}
			for _, l := range lines[:len(lines)-1] {
				f := strings.Split(l, ":")
				if len(f) >= 3 && (f[0] == "shipyard" || f[2] == "1000") {
					t.Fatalf("kept %q", l)
				}
			}
		}
	})
}
