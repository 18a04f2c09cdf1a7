package opensandbox

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// TestStorageFullAnswer: the gateway's full data disk is answered 507 with its own code, not a 500.
func TestStorageFullAnswer(t *testing.T) {
	e := toError(fmt.Errorf("creating: %w", &sandboxes.Error{Code: sandboxes.CodeStorageFull, Message: "the gateway's data disk is full"}))
	if e.Status != http.StatusInsufficientStorage || e.Code != CodeStorageFull {
		t.Fatalf("storage_full answered %d %s", e.Status, e.Code)
	}
}
