package pages

import (
	"testing"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestConsoleKeys: no keys turn the console off (nil), an empty console key is refused, and both sources log in.
func TestConsoleKeys(t *testing.T) {
	if k, err := ConsoleKeys(nil, nil); k != nil || err != nil {
		t.Fatalf("no keys: %v, %v; want the console off", k, err)
	}
	if _, err := ConsoleKeys([]service.KeyConfig{{Key: " "}}, nil); err == nil {
		t.Fatal("an empty console key accepted")
	}
	api, err := service.NewKeyRing([]service.KeyConfig{{Key: "sk-api", Owner: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := ConsoleKeys([]service.KeyConfig{{Key: "sk-console", Owner: "ops", Admin: true}}, api)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := k.Lookup("sk-console"); !ok || !p.Admin {
		t.Errorf("the console's own key: %+v %v", p, ok)
	}
	if p, ok := k.Lookup("sk-api"); !ok || p.Owner != "alice" {
		t.Errorf("the API's key: %+v %v", p, ok)
	}
	if _, ok := k.Lookup("sk-other"); ok {
		t.Error("an unknown key logged in")
	}
}
