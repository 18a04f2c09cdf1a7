package opensandbox

import (
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// The wire shapes of specs/sandbox-lifecycle.yml that sandgate reads and answers.

// ImageSpec names the image.
type ImageSpec struct {
	URI  string          `json:"uri"`
	Auth *map[string]any `json:"auth,omitempty"`
}

// NetworkRule is one egress rule.
type NetworkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// NetworkPolicy is the sandbox's outbound policy.
type NetworkPolicy struct {
	DefaultAction string        `json:"defaultAction,omitempty"`
	Egress        []NetworkRule `json:"egress,omitempty"`
}

// PlatformSpec constrains OS and architecture.
type PlatformSpec struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// CreateRequest is POST /sandboxes's body. Fields sandgate refuses are kept as raw presence checks.
type CreateRequest struct {
	Image            *ImageSpec        `json:"image,omitempty"`
	SnapshotID       string            `json:"snapshotId,omitempty"`
	Platform         *PlatformSpec     `json:"platform,omitempty"`
	Timeout          *float64          `json:"timeout,omitempty"`
	ResourceLimits   map[string]string `json:"resourceLimits,omitempty"`
	ResourceRequests map[string]string `json:"resourceRequests,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Entrypoint       []string          `json:"entrypoint,omitempty"`
	NetworkPolicy    *NetworkPolicy    `json:"networkPolicy,omitempty"`
	CredentialProxy  *struct {
		Enabled bool `json:"enabled"`
	} `json:"credentialProxy,omitempty"`
	SecureAccess bool              `json:"secureAccess,omitempty"`
	Volumes      []map[string]any  `json:"volumes,omitempty"`
	Extensions   map[string]string `json:"extensions,omitempty"`
}

// Status is a sandbox's lifecycle state.
type Status struct {
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Sandbox is one sandbox as OpenSandbox describes it.
type Sandbox struct {
	ID         string            `json:"id"`
	Image      *ImageSpec        `json:"image,omitempty"`
	Status     Status            `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *string           `json:"expiresAt,omitempty"`
	CreatedAt  string            `json:"createdAt"`
}

// Pagination is the list's page information.
type Pagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// ListResponse is GET /sandboxes's answer.
type ListResponse struct {
	Items      []Sandbox  `json:"items"`
	Pagination Pagination `json:"pagination"`
}

// Endpoint is GET /sandboxes/{id}/endpoints/{port}'s answer: no scheme.
type Endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// OpenSandbox's states.
const (
	StatePending    = "Pending"
	StateRunning    = "Running"
	StatePausing    = "Pausing"
	StatePaused     = "Paused"
	StateResuming   = "Resuming"
	StateStopping   = "Stopping"
	StateTerminated = "Terminated"
	StateFailed     = "Failed"
)

// stateOf maps sandgate's status onto OpenSandbox's state. Pause, resume and delete are synchronous in sandgate, so
// Pausing, Resuming and Stopping are never observed; an idle sandbox (compute stopped, workspace kept, started by
// the next request) reads as Paused, which is what resume undoes.
func stateOf(sb *sandboxes.Sandbox) Status {
	switch sb.Status {
	case sandboxes.StatusStarting:
		return Status{State: StatePending, Reason: "starting"}
	case sandboxes.StatusReady:
		return Status{State: StateRunning}
	case sandboxes.StatusPaused:
		return Status{State: StatePaused, Reason: "paused"}
	case sandboxes.StatusIdle:
		return Status{State: StatePaused, Reason: "idle_stopped", Message: "compute is stopped; resume or any request starts it"}
	case sandboxes.StatusExpired:
		return Status{State: StateTerminated, Reason: "ttl_expiry"}
	case sandboxes.StatusFailed:
		st := Status{State: StateFailed, Reason: "runtime_error", Message: sb.LastError}
		if sb.Died != nil {
			st.Message = sb.Died.Message
		}
		return st
	}
	return Status{State: StateFailed, Reason: "unknown", Message: string(sb.Status)}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
