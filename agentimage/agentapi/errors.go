package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error codes the agent answers with. Each maps to one HTTP status (see Status).
const (
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeFileNotFound     = "file_not_found"
	CodeInvalidPath      = "invalid_path"
	CodePermissionDenied = "permission_denied"
	CodeInvalidRequest   = "invalid_request"
	CodeConflict         = "conflict"
	CodePreconditionFail = "precondition_failed"
	CodeTooLarge         = "too_large"
	CodeNoSpace          = "no_space"
	CodeReplayGone       = "replay_gone"
	CodeTimeout          = "timeout"
	CodeUnavailable      = "unavailable"
	CodeNotSupported     = "not_supported"
	CodeInternal         = "internal_error"
	// CodeBadReply is never sent by an agent: the gateway's client gives it to an answer it refuses to act on (a
	// redirect) or a request it refuses to send (one not for its sandbox's agent).
	CodeBadReply = "bad_reply"
)

var codeStatus = map[string]int{
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeNotFound:         http.StatusNotFound,
	CodeFileNotFound:     http.StatusNotFound,
	CodeInvalidPath:      http.StatusBadRequest,
	CodePermissionDenied: http.StatusForbidden,
	CodeInvalidRequest:   http.StatusBadRequest,
	CodeConflict:         http.StatusConflict,
	CodePreconditionFail: http.StatusPreconditionFailed,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeNoSpace:          http.StatusInsufficientStorage,
	CodeReplayGone:       http.StatusGone,
	CodeTimeout:          http.StatusGatewayTimeout,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeNotSupported:     http.StatusNotImplemented,
	CodeInternal:         http.StatusInternalServerError,
	CodeBadReply:         http.StatusBadGateway,
}

// Error is the agent's typed error. On the wire it is {"error":{"code","message","retryable","details"}}.
type Error struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details,omitempty"`
	// HTTPStatus overrides the status implied by Code; 0 means use Status().
	HTTPStatus int `json:"-"`
}

// retryableCodes are the codes a caller may retry unchanged and hope for a different answer.
var retryableCodes = map[string]bool{CodeTimeout: true, CodeUnavailable: true}

// Errorf builds an Error with a formatted message; Retryable follows the code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: retryableCodes[code]}
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// With adds a detail and returns e.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// Status is the HTTP status the error is answered with.
func (e *Error) Status() int {
	if e.HTTPStatus != 0 {
		return e.HTTPStatus
	}
	if s, ok := codeStatus[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Envelope is the JSON body carrying an Error.
type Envelope struct {
	Error *Error `json:"error"`
}

// WriteError answers with err as a typed error. Errors that are not *Error become internal_error.
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: CodeInternal, Message: err.Error()}
	}
	WriteJSON(w, e.Status(), Envelope{Error: e})
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails; nothing left to tell it
}

// ReadError decodes an error response; a body that is not our envelope still yields an Error naming the status.
func ReadError(resp *http.Response, body []byte) *Error {
	var env Envelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.HTTPStatus = resp.StatusCode
		return env.Error
	}
	msg := string(body)
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return &Error{Code: CodeInternal, Message: fmt.Sprintf("agent answered %s: %s", resp.Status, msg), HTTPStatus: resp.StatusCode}
}
