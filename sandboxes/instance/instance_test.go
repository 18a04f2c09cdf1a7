package instance

import (
	"errors"
	"path/filepath"
	"strings"
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

// closeCounter is a driver or a store whose Close is counted; nothing else is called.
type closeCounter struct {
	sandboxes.Driver
	sandboxes.Store
	closes *int
}

func (c closeCounter) Close() error { *c.closes++; return nil }

// TestOpenRefuses: a missing driver, a records store that fails and a bad namespace are errors that say what was
// being opened, not Instances, and what Open was given to own (the driver, the records store) is closed.
func TestOpenRefuses(t *testing.T) {
	boom := errors.New("no records store")
	path := filepath.Join(t.TempDir(), "x.db")
	for _, tc := range []struct {
		name       string
		cfg        func(driver, records closeCounter) Config
		want       string
		recordsToo bool
	}{
		{name: "no driver", cfg: func(closeCounter, closeCounter) Config { return Config{Path: path} }, want: "no driver"},
		{name: "records", cfg: func(d, _ closeCounter) Config {
			return Config{Path: path, Driver: d, Records: func(*sandboxes.BoltStore) (sandboxes.Store, error) { return nil, boom }}
		}, want: "records' store: no records store"},
		{name: "namespace", cfg: func(d, _ closeCounter) Config {
			return Config{Path: path, Namespace: "Not Valid", Driver: d}
		}, want: "building the sandbox manager: namespace"},
		{name: "namespace over records", cfg: func(d, r closeCounter) Config {
			return Config{Path: path, Namespace: "Not Valid", Driver: d, Records: func(*sandboxes.BoltStore) (sandboxes.Store, error) { return r, nil }}
		}, want: "building the sandbox manager: namespace", recordsToo: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var driverCloses, recordCloses int
			cfg := tc.cfg(closeCounter{closes: &driverCloses}, closeCounter{closes: &recordCloses})
			in, err := Open(cfg)
			if err == nil {
				_ = in.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if cfg.Driver != nil && driverCloses != 1 {
				t.Errorf("the driver was closed %d times, want once", driverCloses)
			}
			if tc.recordsToo && recordCloses != 1 {
				t.Errorf("the records store was closed %d times, want once", recordCloses)
			}
		})
	}
}
