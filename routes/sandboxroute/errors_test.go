package sandboxroute

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
)

// edgeAnswers is what the edge (and the console) answer for each core error code. A code the core adds fails
// TestLifecycleErrorsEveryCoreCode until it gets a row here and in lifecycleStatus.
var edgeAnswers = map[string]int{
	sandboxes.CodeNotFound:         404,
	sandboxes.CodeSnapshotNotFound: 404,
	sandboxes.CodeUnknownProfile:   400,
	sandboxes.CodeInvalid:          400,
	sandboxes.CodeCapabilityAbsent: 400,
	sandboxes.CodeImageNotAllowed:  403,
	sandboxes.CodeImageNotFound:    400,
	sandboxes.CodeExpired:          409, // as the Bay API answers it
	sandboxes.CodeTTLInfinite:      409,
	sandboxes.CodeInvalidState:     409,
	sandboxes.CodeWorkspaceInUse:   409,
	sandboxes.CodeContainerDied:    410,
	sandboxes.CodeSnapshotTooLarge: 413,
	sandboxes.CodeQuotaExceeded:    429,
	sandboxes.CodeEngine:           502,
	sandboxes.CodeStartupFailed:    502,
	sandboxes.CodeNotReady:         503,
	sandboxes.CodeTimeout:          504,
	sandboxes.CodeStorageFull:      507, // the gateway's data disk full: reads keep working
}

func TestLifecycleErrorsEveryCoreCode(t *testing.T) {
	for _, code := range sandboxes.ErrorCodes() {
		t.Run(code, func(t *testing.T) {
			want, ok := edgeAnswers[code]
			if !ok {
				t.Fatalf("core code %q has no edge answer: add it to lifecycleStatus and edgeAnswers", code)
			}
			err := fmt.Errorf("wrapped: %w", &sandboxes.Error{Code: code, Message: "m", Hint: "h", Details: map[string]any{"k": "v"}})
			w := httptest.NewRecorder()
			WriteLifecycleError(w, err, "req-9")
			var body ErrorBody
			if jerr := json.Unmarshal(w.Body.Bytes(), &body); jerr != nil {
				t.Fatalf("body %q: %v", w.Body.String(), jerr)
			}
			d := body.Error
			if w.Code != want || d.Code != code || d.Message != "m" || d.RequestID != "req-9" || d.Details["k"] != "v" || d.Details["hint"] != "h" {
				t.Fatalf("%s answered %d %s, want %d with the code, message, details and hint", code, w.Code, w.Body.String(), want)
			}
			if (want == http.StatusServiceUnavailable) != (w.Header().Get("Retry-After") != "") {
				t.Fatalf("%s: Retry-After %q", code, w.Header().Get("Retry-After"))
			}
		})
	}
	// Not a lifecycle error: the sandbox could not be reached; a deadline that passed is a timeout.
	for _, tc := range []struct {
		err  error
		want int
		code string
	}{
		{fmt.Errorf("dialing: connection refused"), 502, CodeUnavailable},
		{fmt.Errorf("dialing: %w", context.DeadlineExceeded), 504, sandboxes.CodeTimeout},
		{&sandboxes.Error{Code: sandboxes.CodeEngine, Message: "slow", Err: context.DeadlineExceeded}, 504, sandboxes.CodeTimeout},
		{&sandboxes.Error{Code: sandboxes.CodeNotReady, Message: "starting", Err: context.DeadlineExceeded}, 503, sandboxes.CodeNotReady},
	} {
		if status, d := StatusFor(tc.err, ""); status != tc.want || d.Code != tc.code {
			t.Errorf("StatusFor(%v) = %d %s, want %d %s", tc.err, status, d.Code, tc.want, tc.code)
		}
	}
}
