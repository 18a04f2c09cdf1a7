package pages

import (
	"errors"
	"net/http"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// The pages and the console answer errors in the edge's envelope, and every core error through the edge's one
// table (sandboxroute.StatusFor): a sandbox's error reads the same whether a browser route or the console met it.
// An agent's own typed error keeps the agent's status and code (agentapi's table); writeError is only for the
// console's own codes (unauthorized, csrf_refused, pty_not_found, rate_limited, ...).

// writeLifecycleError answers a core error (or any failure to reach a sandbox) through the edge's table. The
// service's own checks (another owner's sandbox, an expired one) carry the core's codes: they are answered as the
// core's error of that code; a service code the edge's table lacks is a failure to reach the sandbox (502).
func writeLifecycleError(w http.ResponseWriter, err error) {
	var se *sandboxes.Error
	var e *service.Error
	if !errors.As(err, &se) && errors.As(err, &e) {
		if _, ok := sandboxroute.StatusOf(e.Code); ok {
			err = &sandboxes.Error{Code: e.Code, Message: e.Message, Details: e.Details}
		}
	}
	sandboxroute.WriteLifecycleError(w, err, "")
}

// writeCoreError answers with a core error code the console found itself (a bad request, a sandbox it may not see).
func writeCoreError(w http.ResponseWriter, code, message string) {
	writeLifecycleError(w, &sandboxes.Error{Code: code, Message: message})
}

// writeError answers with one of the console's own codes and its status.
func writeError(w http.ResponseWriter, status int, code, message string) {
	sandboxroute.WriteJSONError(w, status, sandboxroute.ErrorDetail{Code: code, Message: message})
}
