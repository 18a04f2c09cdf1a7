package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// Error is an answer of E2B's API: {"code": <the HTTP status, as a number>, "message": ...}. The SDKs read the
// numeric code (a 404 body with "code":404 is SandboxNotFoundError, a 409 on pause is "already paused"), so it
// always equals the status.
type Error struct {
	Status  int
	Message string
	// RetryAfter, when positive, is sent as Retry-After in whole seconds (the SDK retries a 429 that has one).
	RetryAfterSeconds int
}

func (e *Error) Error() string { return strconv.Itoa(e.Status) + ": " + e.Message }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// notFound is the answer for a sandbox that is missing, gone or another owner's: all the same to the caller.
func notFound(id string) *Error {
	return errorf(http.StatusNotFound, "sandbox %q not found", id)
}

// statusOf is the one table from the service's codes (the core's typed errors included, service.AsError) to
// E2B's statuses. TestErrorTable walks every code.
var statusOf = map[string]int{
	service.CodeValidation:      http.StatusBadRequest,
	service.CodeCapability:      http.StatusNotImplemented,
	service.CodeNotFound:        http.StatusNotFound,
	service.CodeSandboxExpired:  http.StatusNotFound, // E2B: a timed-out sandbox is gone
	service.CodeTTLInfinite:     http.StatusConflict,
	service.CodeQuotaExceeded:   http.StatusTooManyRequests,
	service.CodeSessionNotReady: http.StatusServiceUnavailable,
	service.CodeTimeout:         http.StatusGatewayTimeout,
	service.CodeContainerDied:   http.StatusConflict,
	service.CodeInvalidPath:     http.StatusBadRequest,
	service.CodeUnauthorized:    http.StatusUnauthorized,
	service.CodeForbidden:       http.StatusForbidden,
	service.CodeFileNotFound:    http.StatusNotFound,
	service.CodeConflict:        http.StatusConflict,
	service.CodeInternal:        http.StatusInternalServerError,
	service.CodeShipError:       http.StatusBadGateway,
	service.CodePayloadTooLarge: http.StatusRequestEntityTooLarge,
	service.CodeRateLimited:     http.StatusTooManyRequests,
	service.CodeNoSpace:         http.StatusInsufficientStorage,
	service.CodeStorageFull:     http.StatusInsufficientStorage,
}

// toError maps any error onto the wire: our own *Error as it is, the service's (and the core's) codes through the
// table; an unknown code is an internal error whose text stays in the log.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	se := service.AsError(err)
	status, ok := statusOf[se.Code]
	if !ok || se.Code == service.CodeInternal {
		return errorf(http.StatusInternalServerError, "internal error")
	}
	out := &Error{Status: status, Message: se.Message}
	if h, ok := se.Details["hint"].(string); ok && h != "" {
		out.Message += " (" + h + ")"
	}
	if se.RetryAfter > 0 {
		out.RetryAfterSeconds = int(se.RetryAfter.Seconds() + 0.999)
	} else if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		out.RetryAfterSeconds = 1
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Cache-Control", "no-store")
	if e.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds))
	}
	writeJSON(w, e.Status, struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{e.Status, e.Message})
}
