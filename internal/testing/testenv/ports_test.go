package testenv

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's picks are below the ephemeral range, distinct within a process, and bindable on every address.
func TestFreePortPicks(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p < portLow || p > portHigh {
			t.Fatalf("port %d outside %d-%d", p, portLow, portHigh)
		}
		if seen[p] {
			t.Fatalf("port %d picked twice", p)
		}
		seen[p] = true
	}
	for p := range seen {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
		break
	}
}

// A port another listener holds is never picked: reservation alone is not enough.
func TestFreePortSkipsABoundPort(t *testing.T) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if portFree(l.Addr().(*net.TCPAddr).Port) {
		t.Fatalf("port %d is bound but reads free", l.Addr().(*net.TCPAddr).Port)
	}
}
