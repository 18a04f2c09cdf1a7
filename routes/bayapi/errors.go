package bayapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// CodeMethodNotAllowed is Bay's answer to a path served with another method; the other codes are the service's
// (sandboxes/service/errors.go), which are Bay's names.
const CodeMethodNotAllowed = "method_not_allowed"

// wireError is how Bay answers one of the service's codes: its code on the wire and the status. This is the one
// table from typed errors to Bay's format.
type wireError struct {
	code   string
	status int
}

var codeWire = map[string]wireError{
	service.CodeValidation:      {service.CodeValidation, http.StatusBadRequest},
	service.CodeInvalidPath:     {service.CodeInvalidPath, http.StatusBadRequest},
	service.CodeCapability:      {service.CodeCapability, http.StatusBadRequest},
	service.CodeUnauthorized:    {service.CodeUnauthorized, http.StatusUnauthorized},
	service.CodeForbidden:       {service.CodeForbidden, http.StatusForbidden},
	service.CodeNotFound:        {service.CodeNotFound, http.StatusNotFound},
	service.CodeFileNotFound:    {service.CodeFileNotFound, http.StatusNotFound},
	service.CodeConflict:        {service.CodeConflict, http.StatusConflict},
	service.CodeSandboxExpired:  {service.CodeSandboxExpired, http.StatusConflict},
	service.CodeTTLInfinite:     {service.CodeTTLInfinite, http.StatusConflict},
	service.CodeQuotaExceeded:   {service.CodeQuotaExceeded, http.StatusTooManyRequests},
	service.CodeInternal:        {service.CodeInternal, http.StatusInternalServerError},
	service.CodeShipError:       {service.CodeShipError, http.StatusBadGateway},
	service.CodeSessionNotReady: {service.CodeSessionNotReady, http.StatusServiceUnavailable},
	service.CodeTimeout:         {service.CodeTimeout, http.StatusGatewayTimeout},
	service.CodeContainerDied:   {service.CodeContainerDied, http.StatusGone},
	service.CodePayloadTooLarge: {service.CodePayloadTooLarge, http.StatusRequestEntityTooLarge},
	CodeMethodNotAllowed:        {CodeMethodNotAllowed, http.StatusMethodNotAllowed},
	// Our addition: Retry-After says when to ask again.
	service.CodeRateLimited: {service.CodeRateLimited, http.StatusTooManyRequests},
	// A full disk in the sandbox is the runtime failing, as Bay reports it, with WebDAV's Insufficient Storage.
	service.CodeNoSpace: {service.CodeShipError, http.StatusInsufficientStorage},
	// The gateway's own disk full: our addition, with the same status; the client retries later.
	service.CodeStorageFull: {service.CodeStorageFull, http.StatusInsufficientStorage},
}

// wire is Bay's code and status for e; an unknown code is internal_error's status with the code kept.
func wire(e *service.Error) wireError {
	if w, ok := codeWire[e.Code]; ok {
		return w
	}
	return wireError{e.Code, http.StatusInternalServerError}
}

type errorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id"`
	Details   map[string]any `json:"details"`
}

// writeError answers with err in Bay's envelope.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := service.AsError(err)
	wr := wire(e)
	if wr.status >= 500 {
		// Server-side failures are the operator's business: log them with the id the client was given.
		if l, ok := r.Context().Value(loggerKey).(*slog.Logger); ok {
			l.Warn("sandbox API error", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path,
				"status", wr.status, "code", wr.code, "error", err)
		}
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		details["retry_after_seconds"] = secs
	} else if wr.status == http.StatusServiceUnavailable {
		// Retryable (a rebuild after a crash, a start another request began): say when.
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, wr.status, map[string]any{"error": errorBody{
		Code: wr.code, Message: e.Message, RequestID: requestID(r), Details: details,
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left; nothing to tell it
}

// ValidationIssue is one item of FastAPI's 422 body {"detail":[...]}.
type ValidationIssue struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// validationError is a request that FastAPI would reject with 422 before reaching Bay's handler.
type validationError struct{ issues []ValidationIssue }

func (v *validationError) Error() string {
	if len(v.issues) == 0 {
		return "invalid request"
	}
	return fmt.Sprintf("%v: %s", v.issues[0].Loc, v.issues[0].Msg)
}

func writeValidation(w http.ResponseWriter, v *validationError) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": v.issues})
}
