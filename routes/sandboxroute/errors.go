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

// StatusFor maps a lifecycle error onto the status and envelope a browser route answers with. A dead container is
// 410 container_died with the reason from the lifecycle (oom, sigkill, exit...): the sandbox will not come back by
// retrying, unlike a 502.
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
	switch {
	case d.Code == sandboxes.CodeNotFound:
		return http.StatusNotFound, d
	case d.Code == sandboxes.CodeContainerDied:
		return http.StatusGone, d
	case d.Code == sandboxes.CodeExpired:
		return http.StatusConflict, d
	case d.Code == sandboxes.CodeNotReady:
		return http.StatusServiceUnavailable, d
	case d.Code == sandboxes.CodeQuotaExceeded:
		return http.StatusTooManyRequests, d
	case d.Code == sandboxes.CodeCapabilityAbsent, d.Code == sandboxes.CodeInvalid:
		return http.StatusBadRequest, d
	case d.Code == sandboxes.CodeImageNotAllowed:
		return http.StatusForbidden, d
	case d.Code == sandboxes.CodeTimeout, errors.Is(err, context.DeadlineExceeded):
		d.Code = sandboxes.CodeTimeout
		return http.StatusGatewayTimeout, d
	}
	return http.StatusBadGateway, d
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
