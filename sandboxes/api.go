package sandboxes

import (
	"errors"
	"fmt"
	"time"
)

// Status is a sandbox's state as the API reports it (Bay's set), computed on read.
type Status string

const (
	StatusIdle     Status = "idle"     // no compute running (not started yet, stopped, or idle-reclaimed); workspace kept
	StatusStarting Status = "starting" // container starting, agent not ready yet
	StatusReady    Status = "ready"    // the agent's readiness probe passed
	StatusFailed   Status = "failed"   // could not start, or its container died
	StatusExpired  Status = "expired"  // past its TTL
)

// Sandbox is what callers see of one sandbox.
type Sandbox struct {
	ID           string   `json:"id"`
	Profile      string   `json:"profile"`
	Owner        string   `json:"owner"`
	Status       Status   `json:"status"`
	Capabilities []string `json:"capabilities"`
	// WorkspaceID names the workspace volume (Bay's cargo).
	WorkspaceID   string     `json:"workspace_id"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at"`      // nil: never expires
	IdleExpiresAt *time.Time `json:"idle_expires_at"` // nil: no compute running or no idle timeout
	// LaunchType is "warm" (claimed from the pool) or "cold".
	LaunchType string `json:"launch_type,omitempty"`
	// Died explains a failed sandbox whose container died.
	Died *Death `json:"died,omitempty"`
	// LastError says why the last start failed (a failed status without Died).
	LastError string `json:"last_error,omitempty"`
	// Metadata is the tenant's key/value labels (metadata.go).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Egress is the sandbox's own outbound policy, nil when it has only its profile's.
	Egress *SandboxEgress `json:"egress,omitempty"`
	// OnExpire is what its TTL does: "" (delete), ExpirePause or ExpireStop (expiry.go).
	OnExpire string `json:"on_expire,omitempty"`
	// ExpiredAt is when its TTL paused or stopped it; ExpiresAt is then the end of its retention.
	ExpiredAt *time.Time `json:"expired_at,omitempty"`
}

// Death says why a container stopped without being asked to.
type Death struct {
	Reason   string    `json:"reason"` // oom, sigkill, sigsegv, sigterm, exit, removed
	ExitCode int       `json:"exit_code"`
	At       time.Time `json:"at"`
	Message  string    `json:"message"`
}

// CreateRequest asks for a new sandbox.
type CreateRequest struct {
	// ownWorkspace makes WorkspaceID the new sandbox's own (deleted with it): a copy made for it (fork, snapshot).
	ownWorkspace bool
	// skipPool makes a create cold: a warm claim of it failed (warm_image.go).
	skipPool bool

	Profile string
	Owner   string
	// TTL is the hard lifetime; 0 means the manager's default, negative means never expire.
	TTL time.Duration
	Env map[string]string
	// WorkspaceID reuses an existing workspace volume instead of creating one. It is trusted input: the Manager
	// mounts whatever workspace it names, with no check of Owner against the workspace's owner. A caller that takes
	// it from a client must check that client may use that workspace first (routes/bayapi accepts only a cargo of
	// the caller's owner, admin keys excepted; the Caddy admin API is the operator's own).
	WorkspaceID string
	// WorkspaceMustExist makes WorkspaceID a workspace of CreateWorkspace that still exists, checked under the
	// Manager's lock (workspaces.go): a create and a racing DeleteWorkspace never both succeed.
	WorkspaceMustExist bool
	// Image, when set, runs a caller-chosen image in the profile's shape (profile_image.go): it must be on the
	// profile's allowed_images. Such a create never claims a warm member.
	Image *ImageRequest
	// Resources, where non-zero, lower the profile's limits for this sandbox (Profile.WithResources); asking
	// above them is a validation_error (a dialect may clamp first, as OpenSandbox's does). A create whose limits
	// differ from the profile's never claims a warm member.
	Resources Resources
	// Metadata labels the sandbox (metadata.go); List can filter on it.
	Metadata map[string]string
	// Egress is the sandbox's own outbound policy inside its profile's (metadata.go).
	Egress *SandboxEgress
	// OnExpire is what the TTL does (expiry.go): "" deletes the sandbox; ExpirePause freezes it and ExpireStop
	// stops it, each keeping it for the retention (ExpiryRetention) until it resumes. It needs a TTL.
	OnExpire string
	// RecordWorkspace, when set, lists the sandbox's own workspace (one the Manager makes or copies for it, never a
	// caller's WorkspaceID) among the workspaces, owned by Owner, with this size and backend (its Owner is not
	// read): Bay's managed cargo. The record goes with the sandbox however it goes (workspaces.go).
	RecordWorkspace *WorkspaceSpec
	// UnguessableID gives the sandbox an id of 128 random bits with no '-' (UnguessableIDPrefix + 32 hex digits):
	// for dialects where the id alone opens the sandbox's ports (E2B's {port}-{id}.{domain}, whose proxy splits the
	// label on '-'). Such a create claims only a warm member made with such an id: once a profile has seen one,
	// its pool refills with them (warm.go).
	UnguessableID bool
}

// UnguessableIDPrefix starts the id of a sandbox created with CreateRequest.UnguessableID.
const UnguessableIDPrefix = "sbx"

// ListOptions filters List.
type ListOptions struct {
	Owner  string // empty: every owner
	Status Status // empty: any
	// Statuses, when set, admits any of them (Status included).
	Statuses []Status
	// Metadata, when set, admits only sandboxes whose metadata holds every one of these pairs.
	Metadata map[string]string
	Limit    int
	Cursor   string
}

// Target is how to reach a sandbox's agent: from memory, no I/O.
type Target struct {
	SandboxID string
	// Addr is host:port of the agent.
	Addr string
	// Token is the agent's per-sandbox token.
	Token   string
	AppPort int
}

// Error codes. The API layers map them onto HTTP statuses and their own envelopes.
const (
	CodeNotFound         = "not_found"
	CodeUnknownProfile   = "unknown_profile"
	CodeQuotaExceeded    = "quota_exceeded"
	CodeContainerDied    = "container_died"
	CodeTimeout          = "timeout"
	CodeExpired          = "sandbox_expired"
	CodeTTLInfinite      = "sandbox_ttl_infinite"
	CodeNotReady         = "session_not_ready"
	CodeInvalid          = "validation_error"
	CodeEngine           = "engine_error"
	CodeCapabilityAbsent = "capability_not_supported"
)

// Error is a typed lifecycle error.
type Error struct {
	Code    string
	Message string
	// Hint tells a client what to do (e.g. "create a new sandbox; do not re-run the same code").
	Hint    string
	Details map[string]any
	Err     error
}

func (e *Error) Error() string {
	msg := e.Code + ": " + e.Message
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds a typed error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode is the code of a typed error anywhere in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
