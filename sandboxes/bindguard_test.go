package sandboxes

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckBindSourceRealPaths: every bind that contains the engine's or containerd's socket is refused as written,
// whatever this host's /var/run looks like.
func TestCheckBindSourceRealPaths(t *testing.T) {
	tests := []struct {
		source string
		refuse bool
	}{
		{"/", true},
		{"/run", true},
		{"/var/run", true},
		{"/var", true},
		{"/var/run/docker.sock", true},
		{"/run/docker.sock", true},
		{"/run/containerd", true},
		{"/run/containerd/containerd.sock", true},
		{"/var/run/docker", true},
		{"/run/docker/", true},
		{"/run/./containerd/../docker.sock", true},
		{"//run", true},
		{"/srv/data", false},
		{"/run/user/1000", false},
		{"/var/lib/sandgate-data", false},
		{"/opt/docker.sockets", false},
	}
	for _, tt := range tests {
		err := CheckBindSource(tt.source, EngineSockets)
		if tt.refuse != (err != nil) {
			t.Errorf("%s: error %v, want refused=%v", tt.source, err, tt.refuse)
		}
		if err != nil && !errors.Is(err, ErrEngineSocketBind) {
			t.Errorf("%s: error %v is not ErrEngineSocketBind", tt.source, err)
		}
	}
}

// TestCheckBindSourceSymlinks builds a host layout of its own (a socket that is listening, a /var/run style link,
// links to ancestors, a hard link to the socket) and checks that no spelling gets past the guard.
func TestCheckBindSourceSymlinks(t *testing.T) {
	root := t.TempDir()
	p := func(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(p("run", "containerd"), 0o755))
	must(os.MkdirAll(p("var"), 0o755))
	must(os.MkdirAll(p("srv", "data"), 0o755))
	sock := p("run", "docker.sock")
	ln, err := net.Listen("unix", sock)
	must(err)
	t.Cleanup(func() { ln.Close() })
	must(os.Symlink("../run", p("var", "run")))                // /var/run -> ../run
	must(os.Symlink(p("run"), p("srv", "runlink")))            // an innocent-looking name for /run
	must(os.Symlink(root, p("srv", "rootlink")))               // a link to the whole tree
	must(os.Symlink(sock, p("srv", "sock")))                   // a link to the socket itself
	must(os.Symlink(p("srv", "runlink"), p("srv", "chain")))   // a link to a link
	must(os.Symlink(p("run", "containerd"), p("srv", "ctrd"))) // containerd's directory
	must(os.Link(sock, p("srv", "hard.sock")))                 // a hard link: another name, the same socket
	protected := []string{p("var", "run", "docker.sock"), p("run", "containerd", "containerd.sock")}

	tests := []struct {
		name   string
		source string
		refuse bool
	}{
		{"the socket as configured", p("var", "run", "docker.sock"), true},
		{"the socket under its real name", sock, true},
		{"the linked parent", p("var", "run"), true},
		{"the real parent", p("run"), true},
		{"an ancestor", root, true},
		{"the host root", "/", true},
		{"a link to the parent", p("srv", "runlink"), true},
		{"a link to the root", p("srv", "rootlink"), true},
		{"a link to the socket", p("srv", "sock"), true},
		{"a chain of links", p("srv", "chain"), true},
		{"a link to containerd's directory (socket absent)", p("srv", "ctrd"), true},
		{"a hard link to the socket", p("srv", "hard.sock"), true},
		{"a path through a link", p("srv", "rootlink", "run"), true},
		{"a sibling directory", p("srv", "data"), false},
		{"a missing path", p("srv", "nothing", "here"), false},
		{"the srv directory", p("srv"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBindSource(tt.source, protected)
			if tt.refuse != (err != nil) {
				t.Fatalf("%s: error %v, want refused=%v", tt.source, err, tt.refuse)
			}
			if err != nil && !errors.Is(err, ErrEngineSocketBind) {
				t.Fatalf("error %v is not ErrEngineSocketBind", err)
			}
		})
	}
	if err := CheckBindSource("relative/path", protected); err == nil {
		t.Fatal("a relative source was accepted")
	}
}
