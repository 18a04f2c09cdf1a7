package sandboxroute

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/tickets"
)

// TestWriteRefusal: each refusal Authorize returns gets its status and code, the reason goes to the log and never
// to the client, and an error that is not a refusal is left to the caller.
func TestWriteRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		code    string
		logged  string // in the log line, "" for none
		handled bool
	}{
		{"no route", fmt.Errorf("parsing: %w", ErrNotSandboxRoute), http.StatusNotFound, "not_found", "", true},
		{"store down", tickets.Unavailable(errors.New("dial tcp: refused")), http.StatusServiceUnavailable,
			CodeTicketStoreUnavailable, "spent-ticket store unavailable", true},
		{"cross origin", fmt.Errorf("%w: https://evil.example", ErrCrossOrigin), http.StatusForbidden, CodeCrossOrigin,
			`"reason":"cross_origin"`, true},
		{"replayed", tickets.Replayed("nonce %s spent", "n1"), http.StatusUnauthorized, CodeUnauthorized,
			`"reason":"replayed"`, true},
		{"not a refusal", errors.New("disk on fire"), 0, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			w := httptest.NewRecorder()
			handled := WriteRefusal(w, tc.err, log, Refused{RemoteIP: "192.0.2.7", RequestID: "req-1"})
			if handled != tc.handled {
				t.Fatalf("handled %v, want %v", handled, tc.handled)
			}
			if !handled {
				if w.Body.Len() != 0 || logs.Len() != 0 {
					t.Errorf("answered %q, logged %q for an error that is not a refusal", w.Body, logs.String())
				}
				return
			}
			if w.Code != tc.status || !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`) ||
				!strings.Contains(w.Body.String(), `"request_id":"req-1"`) {
				t.Errorf("answer %d %s, want %d %s", w.Code, w.Body, tc.status, tc.code)
			}
			if strings.Contains(w.Body.String(), "replayed") || strings.Contains(w.Body.String(), "evil") {
				t.Errorf("the answer tells the reason: %s", w.Body)
			}
			if tc.logged == "" {
				return
			}
			if !strings.Contains(logs.String(), tc.logged) || !strings.Contains(logs.String(), `"remote_ip":"192.0.2.7"`) ||
				!strings.Contains(logs.String(), `"request_id":"req-1"`) {
				t.Errorf("log %q lacks %s, the address or the request id", logs.String(), tc.logged)
			}
		})
	}
}
