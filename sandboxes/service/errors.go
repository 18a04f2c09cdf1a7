package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/tickets"
)

// The codes of Error. They are Bay's names (doc/bay_error_codes.md), the vocabulary the first dialect spoke; the
// lifecycle core's codes are reused where it has one. Each dialect maps them to its wire format in one table.
const (
	CodeValidation      = sandboxes.CodeInvalid
	CodeCapability      = sandboxes.CodeCapabilityAbsent
	CodeNotFound        = sandboxes.CodeNotFound
	CodeSandboxExpired  = sandboxes.CodeExpired
	CodeTTLInfinite     = sandboxes.CodeTTLInfinite
	CodeQuotaExceeded   = sandboxes.CodeQuotaExceeded
	CodeSessionNotReady = sandboxes.CodeNotReady
	CodeTimeout         = sandboxes.CodeTimeout
	CodeContainerDied   = sandboxes.CodeContainerDied
	CodeInvalidPath     = "invalid_path"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeFileNotFound    = "file_not_found"
	CodeConflict        = "conflict"
	CodeInternal        = "internal_error"
	// CodeShipError is the sandbox's runtime (its agent) failing or unreachable.
	CodeShipError       = "ship_error"
	CodePayloadTooLarge = "payload_too_large"
	// CodeRateLimited: the caller asked faster than its budget; RetryAfter says when to ask again.
	CodeRateLimited = "rate_limited"
	// CodeNoSpace is the sandbox's disk full: a runtime failure (Bay answers ship_error) that a client can act on.
	CodeNoSpace = "no_space"
	// CodeStorageFull is the gateway's own data disk full: writes are refused, reads work (sandboxes.CodeStorageFull).
	CodeStorageFull = sandboxes.CodeStorageFull
)

// ErrorCodes returns every code an *Error of the service can carry, the core's included (AsError gives an error
// of the core or the agent one of these). Each dialect's error table test walks it beside sandboxes.ErrorCodes, so
// a new code cannot go unmapped; errors_codes_test.go keeps it equal to the Code constants above.
func ErrorCodes() []string {
	return []string{
		CodeValidation, CodeCapability, CodeNotFound, CodeSandboxExpired, CodeTTLInfinite, CodeQuotaExceeded,
		CodeSessionNotReady, CodeTimeout, CodeContainerDied, CodeInvalidPath, CodeUnauthorized, CodeForbidden,
		CodeFileNotFound, CodeConflict, CodeInternal, CodeShipError, CodePayloadTooLarge, CodeRateLimited, CodeNoSpace,
		CodeStorageFull,
	}
}

// Error is a failed operation, in the words every dialect translates.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	// RetryAfter, when positive, is when the caller may ask again.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf makes an Error of code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With adds a detail and returns e.
func (e *Error) With(k string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
	return e
}

// AsError classifies any error of an operation: the service's own, the lifecycle core's, the agent's, a ticket
// rate limit, a deadline; anything else is internal_error. This is the one place those errors get their codes.
func AsError(err error) *Error {
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
		return Errorf(CodeTimeout, "the operation timed out")
	}
	return Errorf(CodeInternal, "%v", err)
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
		sandboxes.CodeContainerDied, sandboxes.CodeStorageFull:
	case sandboxes.CodeUnknownProfile:
		code = CodeValidation
	case sandboxes.CodeInvalidState, sandboxes.CodeWorkspaceInUse:
		code = CodeConflict
	case sandboxes.CodeImageNotAllowed:
		code = CodeForbidden
	case sandboxes.CodeSnapshotNotFound:
		code = CodeNotFound
	case sandboxes.CodeSnapshotTooLarge:
		code = CodePayloadTooLarge
	case sandboxes.CodeStartupFailed:
		// The sandbox's runtime could not bring itself up (an init hook failed, the installer could not get a
		// dependency): ship_error, the code of a runtime inside the sandbox failing, with the runtime's own message
		// in details.last_error. Not conflict: that tells a client its request clashes with a state it can wait out
		// or change, but calling again only repeats the same failed start-up; the fix is the sandbox's
		// configuration, so a client should show the message and create a new sandbox.
		code = CodeShipError
	case sandboxes.CodeEngine, sandboxes.CodeImageNotFound:
		// The gateway's own setup failing (its engine, a profile's image missing from it): the operator's to fix.
		code = CodeInternal
	default: // a code newer than this switch; the dialects' tests walking sandboxes.ErrorCodes name it
		code = CodeInternal
	}
	if len(details) == 0 {
		details = nil
	}
	return &Error{Code: code, Message: msg, Details: details}
}

// agentCodes are the service's codes for the agent's.
var agentCodes = map[string]string{
	agentapi.CodeFileNotFound:   CodeFileNotFound,
	agentapi.CodeNotFound:       CodeNotFound,
	agentapi.CodeInvalidPath:    CodeInvalidPath,
	agentapi.CodeInvalidRequest: CodeValidation,
	agentapi.CodeConflict:       CodeConflict,
	agentapi.CodeTooLarge:       CodePayloadTooLarge,
	agentapi.CodeNoSpace:        CodeNoSpace,
	agentapi.CodeTimeout:        CodeTimeout,
	agentapi.CodeUnavailable:    CodeSessionNotReady,
	agentapi.CodeNotSupported:   CodeCapability,
	// The gateway refused the agent's answer (a redirect): the sandbox's runtime misbehaving.
	agentapi.CodeBadReply: CodeShipError,
}

func fromAgent(ae *agentapi.Error) *Error {
	e := &Error{Message: ae.Message, Details: ae.Details}
	code, ok := agentCodes[ae.Code]
	switch {
	case ae.Code == agentapi.CodeNotFound && strings.HasPrefix(ae.Message, "no route "):
		// The agent in the sandbox's image predates this operation: a runtime problem, not a missing file.
		e.Code = CodeShipError
		e.Message = "the sandbox's agent does not serve this operation (" + ae.Message + "); rebuild the image with a current agent"
	case ok:
		e.Code = code
	default:
		e.Code = CodeShipError
		e.Message = "sandbox runtime error: " + ae.Message
	}
	return e
}

// agentErr keeps the agent's typed errors and turns transport failures into ship_error (timeout at a deadline).
func agentErr(doing string, err error) error {
	if err == nil {
		return nil
	}
	var ae *agentapi.Error
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Errorf(CodeTimeout, "%s timed out", doing)
	}
	return Errorf(CodeShipError, "%s: %v", doing, err)
}
