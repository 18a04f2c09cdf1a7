package instance

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// idleDriver is an engine Open never calls: building an Instance does no I/O. Close is the Manager's last call.
type idleDriver struct{ sandboxes.Driver }

func (idleDriver) Close() error { return nil }

// TestOpenAndClose: Open builds the Manager over the store at Path with metrics, Close stops the loops (it
// returns, so each loop ended) and forgets the start.
func TestOpenAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandgate", "ns.db")
	in, err := Open(Config{Path: path, Namespace: "ns", Driver: idleDriver{}})
	if err != nil {
		t.Fatal(err)
	}
	if in.Manager == nil || in.Metrics == nil || in.Store.Path() != path {
		t.Fatalf("instance: %+v", in)
	}
	in.Started.Store(1)
	if err := in.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if in.Started.Load() != 0 {
		t.Error("a closed instance still counts as started")
	}
}

// TestOpenRefuses: a missing driver, a records store that fails and a bad namespace are errors, not Instances.
func TestOpenRefuses(t *testing.T) {
	boom := errors.New("no records store")
	path := filepath.Join(t.TempDir(), "x.db")
	for name, cfg := range map[string]Config{
		"no driver": {Path: path},
		"records":   {Path: path, Driver: idleDriver{}, Records: func(*sandboxes.BoltStore) (sandboxes.Store, error) { return nil, boom }},
		"namespace": {Path: path, Namespace: "Not Valid", Driver: idleDriver{}},
	} {
		if in, err := Open(cfg); err == nil {
			_ = in.Close()
			t.Errorf("%s: opened", name)
		}
	}
}
