package bayapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/routes/tickets"
	"github.com/sandgate/sandgate/sandboxes"
)

// Bay's error codes (doc/bay_error_codes.md) and the statuses they are answered with.
const (
	CodeValidation       = "validation_error"
	CodeInvalidPath      = "invalid_path"
	CodeCapability       = "capability_not_supported"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeFileNotFound     = "file_not_found"
	CodeConflict         = "conflict"
	CodeSandboxExpired   = "sandbox_expired"
	CodeTTLInfinite      = "sandbox_ttl_infinite"
	CodeQuotaExceeded    = "quota_exceeded"
	CodeInternal         = "internal_error"
	CodeShipError        = "ship_error"
	CodeSessionNotReady  = "session_not_ready"
	CodeTimeout          = "timeout"
	CodeContainerDied    = "container_died"
	CodePayloadTooLarge  = "payload_too_large"
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeRateLimited is our addition: the caller asked faster than its budget; Retry-After says when to ask again.
	CodeRateLimited = "rate_limited"
)

var codeStatus = map[string]int{
	CodeValidation:       http.StatusBadRequest,
	CodeInvalidPath:      http.StatusBadRequest,
	CodeCapability:       http.StatusBadRequest,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeFileNotFound:     http.StatusNotFound,
	CodeConflict:         http.StatusConflict,
	CodeSandboxExpired:   http.StatusConflict,
	CodeTTLInfinite:      http.StatusConflict,
	CodeQuotaExceeded:    http.StatusTooManyRequests,
	CodeInternal:         http.StatusInternalServerError,
	CodeShipError:        http.StatusBadGateway,
	CodeSessionNotReady:  http.StatusServiceUnavailable,
	CodeTimeout:          http.StatusGatewayTimeout,
	CodeContainerDied:    http.StatusGone,
	CodePayloadTooLarge:  http.StatusRequestEntityTooLarge,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeRateLimited:      http.StatusTooManyRequests,
}

// Error is an API error, answered as {"error":{"code","message","request_id","details"}}.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	// Status overrides the status implied by Code.
	Status int
	// RetryAfter, when positive, is sent as Retry-After (whole seconds, rounded up) and details.retry_after_seconds.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func (e *Error) status() int {
	if e.Status != 0 {
		return e.Status
	}
	if s, ok := codeStatus[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) with(k string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
	return e
}

type errorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id"`
	Details   map[string]any `json:"details"`
}

// asAPIError translates errors of the lifecycle core and of the agent into Bay's codes.
func asAPIError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var se *sandboxes.Error
	if errors.As(err, &se) {
		return fromLifecycle(se)
	}
	var ae *agentapi.Error
	if errors.As(err, &ae) {
		return fromAgent(ae)
	}
	var limited *tickets.RateLimitedError
	if errors.As(err, &limited) {
		return &Error{Code: CodeRateLimited, Message: limited.Error(), RetryAfter: limited.RetryAfter}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errorf(CodeTimeout, "the operation timed out")
	}
	return errorf(CodeInternal, "%v", err)
}

func fromLifecycle(se *sandboxes.Error) *Error {
	details := map[string]any{}
	for k, v := range se.Details {
		details[k] = v
	}
	if se.Hint != "" {
		details["hint"] = se.Hint
	}
	msg := se.Message
	code := se.Code
	switch se.Code {
	case sandboxes.CodeNotFound, sandboxes.CodeExpired, sandboxes.CodeTTLInfinite, sandboxes.CodeQuotaExceeded,
		sandboxes.CodeTimeout, sandboxes.CodeNotReady, sandboxes.CodeInvalid, sandboxes.CodeCapabilityAbsent,
		sandboxes.CodeContainerDied:
	case sandboxes.CodeUnknownProfile:
		code = CodeValidation
	case sandboxes.CodeInvalidState:
		code = CodeConflict
	case sandboxes.CodeWorkspaceInUse:
		// In Bay's words: a workspace is a cargo.
		code = CodeConflict
		ids, _ := se.Details["active_sandbox_ids"].([]string)
		msg = fmt.Sprintf("Cargo %v is in use by %d sandbox(es)", se.Details["workspace_id"], len(ids))
		delete(details, "workspace_id")
	case sandboxes.CodeImageNotAllowed:
		code = CodeForbidden
	case sandboxes.CodeSnapshotNotFound:
		code = CodeNotFound
	case sandboxes.CodeSnapshotTooLarge:
		code = CodePayloadTooLarge
	case sandboxes.CodeStartupFailed:
		// The sandbox's runtime could not bring itself up (an init hook failed, the installer could not get a
		// dependency): Bay's ship_error (502), the code it answers when the runtime inside the sandbox fails, with the
		// runtime's own message in details.last_error. Not conflict (409): that tells a client its request clashes
		// with a state it can wait out or change, but calling again only repeats the same failed start-up; the fix
		// is the sandbox's configuration, so a client should show the message and create a new sandbox.
		code = CodeShipError
	case sandboxes.CodeEngine:
		code = CodeInternal
	default:
		code = CodeInternal
	}
	if len(details) == 0 {
		details = nil
	}
	return &Error{Code: code, Message: msg, Details: details}
}

func fromAgent(ae *agentapi.Error) *Error {
	e := &Error{Message: ae.Message, Details: ae.Details}
	switch ae.Code {
	case agentapi.CodeFileNotFound:
		e.Code = CodeFileNotFound
	case agentapi.CodeNotFound:
		if strings.HasPrefix(ae.Message, "no route ") {
			// The agent in the sandbox's image predates this operation: a runtime problem, not a missing file.
			e.Code = CodeShipError
			e.Message = "the sandbox's agent does not serve this operation (" + ae.Message + "); rebuild the image with a current agent"
		} else {
			e.Code = CodeNotFound
		}
	case agentapi.CodeInvalidPath:
		e.Code = CodeInvalidPath
	case agentapi.CodeInvalidRequest:
		e.Code = CodeValidation
	case agentapi.CodeConflict:
		e.Code = CodeConflict
	case agentapi.CodeTooLarge:
		e.Code = CodePayloadTooLarge
	case agentapi.CodeNoSpace:
		e.Code, e.Status = CodeShipError, http.StatusInsufficientStorage
	case agentapi.CodeTimeout:
		e.Code = CodeTimeout
	case agentapi.CodeUnavailable:
		e.Code = CodeSessionNotReady
	case agentapi.CodeNotSupported:
		e.Code = CodeCapability
	default:
		e.Code = CodeShipError
		e.Message = "sandbox runtime error: " + ae.Message
	}
	return e
}

// writeError answers with err in Bay's envelope.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := asAPIError(err)
	if e.status() >= 500 {
		// Server-side failures are the operator's business: log them with the id the client was given.
		if l, ok := r.Context().Value(loggerKey).(*slog.Logger); ok {
			l.Warn("sandbox API error", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path,
				"status", e.status(), "code", e.Code, "error", err)
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
	} else if e.status() == http.StatusServiceUnavailable {
		// Retryable (a rebuild after a crash, a start another request began): say when.
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status(), map[string]any{"error": errorBody{
		Code: e.Code, Message: e.Message, RequestID: requestID(r), Details: details,
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
