package tickets

import "fmt"

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
)

// Error is a refused ticket.
type Error struct {
	Reason Reason
	// Detail is for logs only; it never contains the token.
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "ticket refused: " + string(e.Reason)
	}
	return fmt.Sprintf("ticket refused: %s: %s", e.Reason, e.Detail)
}

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}
