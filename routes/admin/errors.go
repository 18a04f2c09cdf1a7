package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Error is a failed admin call: the status it is answered with and the error whose text becomes the message.
type Error struct {
	Status int
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// ErrorFor maps a failure of the Manager onto the admin endpoint's answer: a lifecycle error with the status the
// edge and the console answer it with (one table, sandboxroute.StatusOf, whose statuses are the Bay API's: an
// operator, a browser and an API client see a sandbox's state alike, sandbox_expired 409 everywhere); a deadline
// that passed as 504; anything else as 500. The message is the error's own text, in Caddy's admin envelope.
func ErrorFor(err error) *Error {
	code := sandboxes.ErrorCode(err)
	var se *service.Error
	if code == "" && errors.As(err, &se) {
		code = se.Code // the service's own checks (an expired sandbox) carry the core's codes
	}
	if status, ok := sandboxroute.StatusOf(code); ok {
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
