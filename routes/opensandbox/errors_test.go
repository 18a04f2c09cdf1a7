package opensandbox

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestStorageFullAnswer: the gateway's full data disk is answered 507 with its own code, not a 500.
func TestStorageFullAnswer(t *testing.T) {
	e := toError(fmt.Errorf("creating: %w", &sandboxes.Error{Code: sandboxes.CodeStorageFull, Message: "the gateway's data disk is full"}))
	if e.Status != http.StatusInsufficientStorage || e.Code != CodeStorageFull {
		t.Fatalf("storage_full answered %d %s", e.Status, e.Code)
	}
}

// TestEveryCodeMapped walks every code of the core (sandboxes.ErrorCodes) and of the service
// (service.ErrorCodes): each has a row in the one table, so a new code cannot fall through to the internal error.
func TestEveryCodeMapped(t *testing.T) {
	for _, code := range sandboxes.ErrorCodes() {
		if _, ok := lifecycleErrors[code]; !ok {
			t.Errorf("core code %q has no row in lifecycleErrors", code)
		}
		if e := toError(&sandboxes.Error{Code: code, Message: "x"}); e.Code == CodeInternal {
			t.Errorf("core code %q answers %s", code, e.Code)
		}
	}
	for _, code := range service.ErrorCodes() {
		_, core := lifecycleErrors[code]
		_, own := serviceErrors[code]
		if core == own {
			t.Errorf("service code %q: in lifecycleErrors %v, in serviceErrors %v; want exactly one", code, core, own)
		}
		e := toError(service.Errorf(code, "x"))
		if (e.Code == CodeInternal) != (code == service.CodeInternal) {
			t.Errorf("service code %q answers %d %s", code, e.Status, e.Code)
		}
	}
}
