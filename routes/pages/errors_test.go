package pages

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
)

// consoleAnswers is the console's status for each core error code: the edge's (sandboxroute's table). A code the
// core adds fails TestConsoleAnswersEveryCoreCode until it gets a row here.
var consoleAnswers = map[string]int{
	sandboxes.CodeNotFound:         404,
	sandboxes.CodeSnapshotNotFound: 404,
	sandboxes.CodeUnknownProfile:   400,
	sandboxes.CodeInvalid:          400,
	sandboxes.CodeCapabilityAbsent: 400,
	sandboxes.CodeImageNotAllowed:  403,
	sandboxes.CodeExpired:          409,
	sandboxes.CodeTTLInfinite:      409,
	sandboxes.CodeInvalidState:     409,
	sandboxes.CodeContainerDied:    410,
	sandboxes.CodeSnapshotTooLarge: 413,
	sandboxes.CodeQuotaExceeded:    429,
	sandboxes.CodeEngine:           502,
	sandboxes.CodeStartupFailed:    502,
	sandboxes.CodeNotReady:         503,
	sandboxes.CodeTimeout:          504,
}

// TestConsoleAnswersEveryCoreCode makes the console's delete fail with each core error code in turn and checks the
// answer: the table's status, the code and the message in the edge's envelope.
func TestConsoleAnswersEveryCoreCode(t *testing.T) {
	f := newFixture(t, nil)
	ck, csrf := f.login(t, "key-alice")
	for _, code := range sandboxes.ErrorCodes() {
		t.Run(code, func(t *testing.T) {
			want, ok := consoleAnswers[code]
			if !ok {
				t.Fatalf("core code %q has no console answer", code)
			}
			f.life.deleteErr = &sandboxes.Error{Code: code, Message: "refused: " + code}
			r := httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/sb-alice", nil)
			r.AddCookie(ck)
			r.Header.Set(CSRFHeader, csrf)
			w := f.do(t, r)
			var body sandboxroute.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if w.Code != want || body.Error.Code != code || body.Error.Message != "refused: "+code {
				t.Fatalf("delete failing with %s answered %d %s, want %d", code, w.Code, w.Body.String(), want)
			}
		})
	}
	// A failure that is not the lifecycle's: the sandbox could not be reached.
	f.life.deleteErr = errors.New("engine unreachable")
	r := httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/sb-alice", nil)
	r.AddCookie(ck)
	r.Header.Set(CSRFHeader, csrf)
	if w := f.do(t, r); w.Code != http.StatusBadGateway {
		t.Fatalf("untyped failure: %d %s", w.Code, w.Body.String())
	}
}
