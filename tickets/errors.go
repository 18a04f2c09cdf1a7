package tickets

import (
	"errors"
	"fmt"
)

// Reason says why a ticket was refused. It is for logs: clients always get the same generic 401, so a prober learns
// nothing about which check failed.
type Reason string

// Refusal reasons.
const (
	ReasonMissing      Reason = "missing"       // no ticket and no session
	ReasonMalformed    Reason = "malformed"     // not a JWT, or claims of the wrong shape
	ReasonForged       Reason = "forged"        // bad signature, wrong algorithm, wrong audience or issuer
	ReasonExpired      Reason = "expired"       // past exp (plus leeway) or before nbf
	ReasonWrongSandbox Reason = "wrong_sandbox" // valid, but for another sandbox
	ReasonWrongKind    Reason = "wrong_kind"    // valid, but for another route kind
	ReasonReadOnly     Reason = "read_only"     // a read ticket used for a write
	ReasonReplayed     Reason = "replayed"      // its nonce was spent already (or cannot be proven unspent)
	// ReasonUnavailable: the one-time memory (a shared store) could not be asked. The ticket is refused, fail
	// closed, but it was not spent: the same ticket may be presented again once the store answers.
	ReasonUnavailable Reason = "unavailable"
)

// ErrUnavailable matches (errors.Is) a refusal because the one-time memory could not answer: retryable.
var ErrUnavailable = errors.New("the spent-ticket store is unavailable")

// Error is a refused ticket.
type Error struct {
	Reason Reason
	// Detail is for logs only; it never contains the token.
	Detail string
	// Err is the cause, when a store failed.
	Err error
}

// Unwrap is the cause of a store failure.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every ReasonUnavailable refusal match ErrUnavailable.
func (e *Error) Is(target error) bool {
	return target == ErrUnavailable && e.Reason == ReasonUnavailable
}

// Retryable reports whether the same ticket may succeed later: only when the store could not answer.
func (e *Error) Retryable() bool { return e.Reason == ReasonUnavailable }

// Unavailable is the refusal a SpentStore returns when it cannot answer: cause says what failed.
func Unavailable(cause error) *Error {
	return &Error{Reason: ReasonUnavailable, Detail: cause.Error(), Err: cause}
}

// Replayed is the refusal a SpentStore returns for a spent nonce or a subject at its bound.
func Replayed(format string, args ...any) *Error { return refuse(ReasonReplayed, format, args...) }
func (e *Error) Error() string {
	if e.Detail == "" {
		return "ticket refused: " + string(e.Reason)
	}
	return fmt.Sprintf("ticket refused: %s: %s", e.Reason, e.Detail)
}

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}
