package service

import (
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// DefaultProfile is what a create without a profile asks for (Bay's default).
const DefaultProfile = "python-default"

// SandboxView is a sandbox as the APIs show it: Bay's SandboxResponse, field for field (the REST API answers it,
// the MCP tools return it).
type SandboxView struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	Profile       string          `json:"profile"`
	CargoID       *string         `json:"cargo_id"`
	Capabilities  []string        `json:"capabilities"`
	CreatedAt     string          `json:"created_at"`
	ExpiresAt     *string         `json:"expires_at"`
	IdleExpiresAt *string         `json:"idle_expires_at"`
	Containers    []ContainerInfo `json:"containers"`
	// LastError says why the sandbox's last start failed (status "failed"), else null. A sandgate addition: Bay's
	// clients ignore fields they do not know.
	LastError *string `json:"last_error"`
}

// ContainerInfo describes a runtime container of a ready sandbox (Bay fills it on GET-one only).
type ContainerInfo struct {
	Name         string   `json:"name"`
	RuntimeType  string   `json:"runtime_type"`
	Status       string   `json:"status"`
	Version      string   `json:"version"`
	Capabilities []string `json:"capabilities"`
	Healthy      bool     `json:"healthy"`
}

// Describe is sb as the APIs show it; withContainers adds its runtime container (Bay fills it on GET-one only), whose
// version is the gateway's.
func Describe(sb sandboxes.Sandbox, version string, withContainers bool) SandboxView {
	caps := sb.Capabilities
	if caps == nil {
		caps = []string{}
	}
	resp := SandboxView{
		ID: sb.ID, Status: DisplayStatus(sb.Status), Profile: sb.Profile, Capabilities: caps,
		CreatedAt: ISO(sb.CreatedAt), ExpiresAt: isoPtr(sb.ExpiresAt), IdleExpiresAt: isoPtr(sb.IdleExpiresAt),
	}
	if sb.WorkspaceID != "" {
		id := sb.WorkspaceID
		resp.CargoID = &id
	}
	if sb.LastError != "" {
		msg := sb.LastError
		resp.LastError = &msg
	}
	if withContainers && sb.Status == sandboxes.StatusReady {
		resp.Containers = []ContainerInfo{{
			Name: "sandgate-agent", RuntimeType: "ship", Status: "running", Version: version,
			Capabilities: caps, Healthy: true,
		}}
	}
	return resp
}

// DisplayStatus is the status a client sees. Bay answers a create with idle (no session yet) and a warm claim with
// ready; we start every sandbox eagerly, so a sandbox whose agent is not ready yet reads idle until it is usable,
// and starting is never answered (docs/api.md lists this among the deliberate differences).
func DisplayStatus(s sandboxes.Status) string {
	if s == sandboxes.StatusStarting {
		return string(sandboxes.StatusIdle)
	}
	return string(s)
}

// ISO is the timestamp format of Bay's answers (microseconds, UTC, Z).
func ISO(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func isoPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ISO(*t)
	return &s
}
