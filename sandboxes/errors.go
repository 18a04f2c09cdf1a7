package sandboxes

import "fmt"

// HintContainerDied is what a client should do when its sandbox died.
const HintContainerDied = "create a new sandbox; do not re-run the same code"

func notFound(id string) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("sandbox %s not found", id)}
}

func expiredError(id string) error {
	return &Error{Code: CodeExpired, Message: fmt.Sprintf("sandbox %s has expired", id),
		Hint: "create a new sandbox; an expired sandbox and its workspace cannot be revived"}
}

func diedError(id string, d *Death) error {
	return &Error{Code: CodeContainerDied, Message: fmt.Sprintf("sandbox %s: its container died (%s)", id, d.Message),
		Hint: HintContainerDied, Details: map[string]any{"reason": d.Reason, "exit_code": d.ExitCode, "at": d.At}}
}
