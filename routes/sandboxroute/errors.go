package sandboxroute

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/sandgate/sandgate/sandboxes"
)

// Code names for errors this package answers with besides the lifecycle's own.
const (
	CodeUnauthorized = "unauthorized"
	CodeUnavailable  = "sandbox_unavailable"
	// CodeTicketStoreUnavailable: the fleet's spent-ticket store could not be asked. The ticket was refused but
	// not spent, so the same URL may be retried.
	CodeTicketStoreUnavailable = "ticket_store_unavailable"
	// CodeCrossOrigin: a session cookie came with a request from a page of another origin (ErrCrossOrigin).
	CodeCrossOrigin = "cross_origin"
)

// ErrorBody is the envelope every sandgate HTTP error uses ({"error":{code,message,request_id,details}}), the
// Bay API's shape.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of the envelope.
type ErrorDetail struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id,omitempty"`
	Details   map[string]any `json:"details,omitempty"`
}

// WriteJSONError answers with the envelope.
func WriteJSONError(w http.ResponseWriter, status int, d ErrorDetail) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: d}) // nothing more to tell a client we cannot write to
}

// WriteUnauthorized answers a refused ticket. The body is the same whatever the reason, so probing learns nothing;
// the reason goes to the gateway's log.
func WriteUnauthorized(w http.ResponseWriter, requestID string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sandgate"`)
	w.Header().Set("Referrer-Policy", "no-referrer")
	WriteJSONError(w, http.StatusUnauthorized, ErrorDetail{Code: CodeUnauthorized,
		Message: "a valid ticket is required", RequestID: requestID})
}

// WriteTicketStoreUnavailable answers a ticket refused because the shared spent-ticket store did not answer
// (tickets.ErrUnavailable): 503 with Retry-After, since the ticket is still good.
func WriteTicketStoreUnavailable(w http.ResponseWriter, requestID string) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Referrer-Policy", "no-referrer")
	WriteJSONError(w, http.StatusServiceUnavailable, ErrorDetail{Code: CodeTicketStoreUnavailable,
		Message: "the ticket could not be checked right now; retry", RequestID: requestID})
}

// WriteCrossOrigin answers a session cookie refused for the page that sent it (ErrCrossOrigin): 403, with a body
// that names the way in (a fresh ticket) rather than the cookie.
func WriteCrossOrigin(w http.ResponseWriter, requestID string) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	WriteJSONError(w, http.StatusForbidden, ErrorDetail{Code: CodeCrossOrigin,
		Message:   "the session cookie is not accepted from another origin; open this route with a ticket",
		RequestID: requestID})
}

// lifecycleStatus is the edge's one table from the core's error codes to HTTP statuses, used by the browser routes
// and by the console, which answer in the same envelope. Every code of sandboxes.ErrorCodes has a row (a test
// walks them); the statuses agree with the Bay API's. A dead container is 410: the sandbox will not come back by
// retrying, unlike a 502.
var lifecycleStatus = map[string]int{
	sandboxes.CodeNotFound:         http.StatusNotFound,
	sandboxes.CodeSnapshotNotFound: http.StatusNotFound,
	sandboxes.CodeUnknownProfile:   http.StatusBadRequest,
	sandboxes.CodeInvalid:          http.StatusBadRequest,
	sandboxes.CodeCapabilityAbsent: http.StatusBadRequest,
	sandboxes.CodeImageNotAllowed:  http.StatusForbidden,
	sandboxes.CodeImageNotFound:    http.StatusBadRequest,
	sandboxes.CodeExpired:          http.StatusConflict,
	sandboxes.CodeTTLInfinite:      http.StatusConflict,
	sandboxes.CodeInvalidState:     http.StatusConflict,
	sandboxes.CodeWorkspaceInUse:   http.StatusConflict,
	sandboxes.CodeContainerDied:    http.StatusGone,
	sandboxes.CodeSnapshotTooLarge: http.StatusRequestEntityTooLarge,
	sandboxes.CodeQuotaExceeded:    http.StatusTooManyRequests,
	sandboxes.CodeEngine:           http.StatusBadGateway,
	sandboxes.CodeStartupFailed:    http.StatusBadGateway,
	sandboxes.CodeNotReady:         http.StatusServiceUnavailable,
	sandboxes.CodeTimeout:          http.StatusGatewayTimeout,
	sandboxes.CodeStorageFull:      http.StatusInsufficientStorage,
}

// StatusOf is the table's status for a core error code; ok is false for a code without a row. The admin endpoint
// answers core errors with these statuses too (routes/admin), in Caddy's envelope.
func StatusOf(code string) (status int, ok bool) {
	status, ok = lifecycleStatus[code]
	return status, ok
}

// StatusFor maps an error onto the status and envelope a browser route answers with: a lifecycle error through
// lifecycleStatus, with its code, message, details and hint; anything else is 502 sandbox_unavailable. A
// gateway-side failure (502) that was a deadline passing is answered as the 504 timeout it was.
func StatusFor(err error, requestID string) (int, ErrorDetail) {
	d := ErrorDetail{Code: CodeUnavailable, Message: err.Error(), RequestID: requestID}
	var se *sandboxes.Error
	if errors.As(err, &se) {
		d.Code, d.Message = se.Code, se.Message
		if len(se.Details) > 0 || se.Hint != "" {
			d.Details = make(map[string]any, len(se.Details)+1)
			for k, v := range se.Details {
				d.Details[k] = v
			}
			if se.Hint != "" {
				d.Details["hint"] = se.Hint
			}
		}
	}
	status, ok := StatusOf(d.Code)
	if !ok {
		status = http.StatusBadGateway
	}
	if status == http.StatusBadGateway && errors.Is(err, context.DeadlineExceeded) {
		d.Code, status = sandboxes.CodeTimeout, http.StatusGatewayTimeout
	}
	return status, d
}

// WriteLifecycleError answers with StatusFor's mapping; a not-ready sandbox also gets Retry-After.
func WriteLifecycleError(w http.ResponseWriter, err error, requestID string) {
	status, d := StatusFor(err, requestID)
	if status == http.StatusServiceUnavailable {
		retry := 1
		if ms, ok := d.Details["retry_after_ms"].(int); ok && ms > 1000 {
			retry = (ms + 999) / 1000
		}
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	WriteJSONError(w, status, d)
}
