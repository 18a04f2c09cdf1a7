package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandgate/sandgate/sandboxes"
)

// Error is a failed admin call: the status it is answered with and the error whose text becomes the message.
type Error struct {
	Status int
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// lifecycleStatus is the admin endpoint's one table from the core's error codes to HTTP statuses. Every code of
// sandboxes.ErrorCodes has a row (a test walks them); the statuses are the Bay API's, so an operator and an API
// client see a sandbox's state the same way (sandbox_expired is 409 on both).
var lifecycleStatus = map[string]int{
	sandboxes.CodeNotFound:         http.StatusNotFound,
	sandboxes.CodeSnapshotNotFound: http.StatusNotFound,
	sandboxes.CodeUnknownProfile:   http.StatusBadRequest,
	sandboxes.CodeInvalid:          http.StatusBadRequest,
	sandboxes.CodeCapabilityAbsent: http.StatusBadRequest,
	sandboxes.CodeImageNotAllowed:  http.StatusForbidden,
	sandboxes.CodeExpired:          http.StatusConflict,
	sandboxes.CodeTTLInfinite:      http.StatusConflict,
	sandboxes.CodeInvalidState:     http.StatusConflict,
	sandboxes.CodeContainerDied:    http.StatusGone,
	sandboxes.CodeSnapshotTooLarge: http.StatusRequestEntityTooLarge,
	sandboxes.CodeQuotaExceeded:    http.StatusTooManyRequests,
	sandboxes.CodeEngine:           http.StatusInternalServerError,
	sandboxes.CodeStartupFailed:    http.StatusBadGateway,
	sandboxes.CodeNotReady:         http.StatusServiceUnavailable,
	sandboxes.CodeTimeout:          http.StatusGatewayTimeout,
}

// ErrorFor maps a failure of the Manager onto the admin endpoint's answer: a lifecycle error through
// lifecycleStatus, a deadline that passed as 504, anything else as 500. The message is the error's own text.
func ErrorFor(err error) *Error {
	if status, ok := lifecycleStatus[sandboxes.ErrorCode(err)]; ok {
		return &Error{Status: status, Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Status: http.StatusGatewayTimeout, Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Err: err}
}

func methodNotAllowed(r *http.Request) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
}
