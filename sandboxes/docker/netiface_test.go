package docker

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

func TestInterfaceExists(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"lo", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../lo", false},
		{"lo/../lo", false},
		{"sgnosuchbridge", false},
	} {
		if got := interfaceExists(c.name); got != c.want {
			t.Errorf("interfaceExists(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestNetworkInterfaceFollowsARecreatedNetwork checks the kept answer of networkInterface on the real engine: a
// network removed and made again under the same name has a new bridge, and the next call finds it, not the old one.
func TestNetworkInterfaceFollowsARecreatedNetwork(t *testing.T) {
	testenv.Integration(t)
	ctx := context.Background()
	d, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	name := testenv.Unique("sgiface")
	create := func() string {
		nw, err := d.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true})
		if err != nil {
			t.Fatal(err)
		}
		return "br-" + nw.ID[:12]
	}
	remove := func() {
		if err := d.cli.NetworkRemove(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	first := create()
	t.Cleanup(func() { _ = d.cli.NetworkRemove(context.Background(), name) })
	for range 2 { // the second answer is the kept one
		if got, err := d.networkInterface(ctx, name); err != nil || got != first {
			t.Fatalf("networkInterface = %q, %v; want %q", got, err, first)
		}
	}
	d.ifaceMu.Lock()
	kept := d.ifaces[name]
	d.ifaceMu.Unlock()
	if kept != first {
		t.Fatalf("networkInterface kept %q for %s, want %q", kept, name, first)
	}
	remove()
	if _, err := d.networkInterface(ctx, name); err == nil {
		t.Fatal("a removed network still has an interface")
	}
	second := create()
	if second == first {
		t.Fatalf("the engine gave the new network the old id %s", first)
	}
	if got, err := d.networkInterface(ctx, name); err != nil || got != second {
		t.Fatalf("after the network was made again: networkInterface = %q, %v; want %q", got, err, second)
	}
}
