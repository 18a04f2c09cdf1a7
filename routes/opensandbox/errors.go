package opensandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// OpenSandbox's error codes (server/opensandbox_server/services/constants.py and middleware/auth.py), plus a few of
// ours in its SANDBOX:: namespace for what sandgate refuses where OpenSandbox would not.
const (
	CodeMissingAPIKey          = "MISSING_API_KEY"
	CodeInvalidAPIKey          = "INVALID_API_KEY"
	CodeSandboxNotFound        = "DOCKER::SANDBOX_NOT_FOUND"
	CodeSandboxNotRunning      = "DOCKER::SANDBOX_NOT_RUNNING"
	CodeSandboxNotPaused       = "DOCKER::SANDBOX_NOT_PAUSED"
	CodeStartFailed            = "DOCKER::SANDBOX_START_FAILED"
	CodeQueryFailed            = "DOCKER::SANDBOX_QUERY_FAILED"
	CodeInvalidExpiration      = "DOCKER::INVALID_EXPIRATION"
	CodeExpirationNotExtended  = "DOCKER::EXPIRATION_NOT_EXTENDED"
	CodeInvalidEntrypoint      = "DOCKER::INVALID_ENTRYPOINT"
	CodeInvalidPort            = "DOCKER::INVALID_PORT"
	CodeInvalidMetadata        = "SANDBOX::INVALID_METADATA_LABEL"
	CodeAPINotSupported        = "SANDBOX::API_NOT_SUPPORTED"
	CodeInvalidRequest         = "SANDBOX::INVALID_REQUEST"
	CodeImageNotSupported      = "SANDBOX::IMAGE_NOT_SUPPORTED"
	CodePolicyNotEnforceable   = "SANDBOX::NETWORK_POLICY_NOT_ENFORCEABLE"
	CodeQuotaExceeded          = "SANDBOX::QUOTA_EXCEEDED"
	CodeTimeout                = "SANDBOX::TIMEOUT"
	CodeInternal               = "SANDBOX::INTERNAL_ERROR"
	CodeNotFound               = "NOT_FOUND"
	CodeMethodNotAllowed       = "METHOD_NOT_ALLOWED"
	CodeProxyUnavailable       = "SANDBOX::PROXY_UNAVAILABLE"
	CodeStorageFull            = "SANDBOX::STORAGE_FULL"
	CodeConflict               = "SANDBOX::CONFLICT"
	CodeTooLarge               = "SANDBOX::PAYLOAD_TOO_LARGE"
	CodeForbidden              = "SANDBOX::FORBIDDEN"
	CodeRateLimited            = "SANDBOX::RATE_LIMITED"
	codeSandboxNotFoundMessage = "sandbox %s not found"
)

// Error is an API error, answered as {"code","message"} with Status.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(id string) *Error {
	return errorf(http.StatusNotFound, CodeSandboxNotFound, codeSandboxNotFoundMessage, id)
}

// lifecycleErrors is the one table from the core's typed errors to OpenSandbox's statuses and codes.
var lifecycleErrors = map[string]struct {
	status int
	code   string
}{
	sandboxes.CodeNotFound:         {http.StatusNotFound, CodeSandboxNotFound},
	sandboxes.CodeExpired:          {http.StatusNotFound, CodeSandboxNotFound},
	sandboxes.CodeUnknownProfile:   {http.StatusBadRequest, CodeImageNotSupported},
	sandboxes.CodeImageNotAllowed:  {http.StatusBadRequest, CodeImageNotSupported},
	sandboxes.CodeImageNotFound:    {http.StatusBadRequest, CodeImageNotSupported},
	sandboxes.CodeQuotaExceeded:    {http.StatusTooManyRequests, CodeQuotaExceeded},
	sandboxes.CodeContainerDied:    {http.StatusConflict, CodeSandboxNotRunning},
	sandboxes.CodeTimeout:          {http.StatusGatewayTimeout, CodeTimeout},
	sandboxes.CodeTTLInfinite:      {http.StatusConflict, CodeExpirationNotExtended},
	sandboxes.CodeNotReady:         {http.StatusServiceUnavailable, CodeSandboxNotRunning},
	sandboxes.CodeInvalid:          {http.StatusBadRequest, CodeInvalidRequest},
	sandboxes.CodeEngine:           {http.StatusInternalServerError, CodeQueryFailed},
	sandboxes.CodeCapabilityAbsent: {http.StatusNotImplemented, CodeAPINotSupported},
	sandboxes.CodeInvalidState:     {http.StatusConflict, CodeSandboxNotRunning},
	sandboxes.CodeStartupFailed:    {http.StatusInternalServerError, CodeStartFailed},
	sandboxes.CodeStorageFull:      {http.StatusInsufficientStorage, CodeStorageFull},
	sandboxes.CodeSnapshotNotFound: {http.StatusNotFound, CodeNotFound},
	sandboxes.CodeSnapshotTooLarge: {http.StatusRequestEntityTooLarge, CodeTooLarge},
	sandboxes.CodeWorkspaceInUse:   {http.StatusConflict, CodeConflict},
}

// serviceErrors maps the service's own codes (service.ErrorCodes that are not the core's: a service error with a
// core code goes through lifecycleErrors) onto OpenSandbox's statuses and codes.
var serviceErrors = map[string]struct {
	status int
	code   string
}{
	service.CodeInvalidPath:     {http.StatusBadRequest, CodeInvalidRequest},
	service.CodeUnauthorized:    {http.StatusUnauthorized, CodeInvalidAPIKey},
	service.CodeForbidden:       {http.StatusForbidden, CodeForbidden},
	service.CodeFileNotFound:    {http.StatusNotFound, CodeNotFound},
	service.CodeConflict:        {http.StatusConflict, CodeConflict},
	service.CodeInternal:        {http.StatusInternalServerError, CodeInternal},
	service.CodeShipError:       {http.StatusBadGateway, CodeProxyUnavailable},
	service.CodePayloadTooLarge: {http.StatusRequestEntityTooLarge, CodeTooLarge},
	service.CodeRateLimited:     {http.StatusTooManyRequests, CodeRateLimited},
	service.CodeNoSpace:         {http.StatusInsufficientStorage, CodeStorageFull},
}

// toError maps any error onto the wire: our own *Error as it is, a lifecycle error through the table, a service
// error through the same table by its code (the service's own codes through serviceErrors), anything else as an
// internal error whose text stays in the log.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var se *sandboxes.Error
	if errors.As(err, &se) {
		if m, ok := lifecycleErrors[se.Code]; ok {
			msg := se.Message
			if se.Hint != "" {
				msg += " (" + se.Hint + ")"
			}
			return &Error{Status: m.status, Code: m.code, Message: msg}
		}
	}
	var sv *service.Error
	if errors.As(err, &sv) {
		m, ok := lifecycleErrors[sv.Code]
		if !ok {
			m, ok = serviceErrors[sv.Code]
		}
		if ok && sv.Code != service.CodeInternal {
			return &Error{Status: m.status, Code: m.code, Message: sv.Message}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left
}

func writeError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Cache-Control", "no-store")
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, map[string]string{"code": e.Code, "message": e.Message})
}
