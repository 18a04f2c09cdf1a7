package caddymodule

import (
	"errors"
	"testing"
)

type closeCounter struct{ closed int }

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestPoolClosesOnLastRelease: a value is made once per key, shared by every load, and closed only when the last
// reference goes; a failed make leaves nothing pooled.
func TestPoolClosesOnLastRelease(t *testing.T) {
	p := newPool[*closeCounter]()
	made := 0
	create := func() (*closeCounter, error) { made++; return new(closeCounter), nil }
	a, err := p.load("k", create)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.load("k", create)
	if err != nil || a != b || made != 1 {
		t.Fatalf("second load: %p %p made=%d err=%v", a, b, made, err)
	}
	if err := p.release("k"); err != nil || a.closed != 0 {
		t.Fatalf("first release: closed=%d err=%v", a.closed, err)
	}
	if err := p.release("k"); err != nil || a.closed != 1 {
		t.Fatalf("last release: closed=%d err=%v", a.closed, err)
	}
	if err := p.release(""); err != nil {
		t.Fatalf("empty key: %v", err)
	}
	boom := errors.New("boom")
	if _, err := p.load("bad", func() (*closeCounter, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed make: %v", err)
	}
	if _, loaded := p.p.References("bad"); loaded {
		t.Fatal("a failed make stayed pooled")
	}
}
