package sandboxes

// ErrorCodes returns every code an *Error of this package can carry. Each API dialect maps them in one table of
// its own, and its test walks this list, so a new code without a mapping fails those tests instead of falling
// through to a default; error_codes_test.go keeps the list equal to the package's Code constants.
func ErrorCodes() []string {
	return []string{
		CodeNotFound, CodeUnknownProfile, CodeQuotaExceeded, CodeContainerDied, CodeTimeout, CodeExpired,
		CodeTTLInfinite, CodeNotReady, CodeInvalid, CodeEngine, CodeCapabilityAbsent, CodeInvalidState,
		CodeImageNotAllowed, CodeImageNotFound, CodeStartupFailed, CodeSnapshotNotFound, CodeSnapshotTooLarge, CodeWorkspaceInUse,
		CodeStorageFull,
	}
}
