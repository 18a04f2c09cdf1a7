// Package agentapi holds what the gateway and the in-sandbox agent agree on: the port, the token's name, the
// error envelope and the wire types of the agent's HTTP API. It has no dependencies beyond the standard library.
package agentapi

// DefaultPort is the single port the agent serves everything on (HTTP/1.1 and h2c).
const DefaultPort = 7777

// Environment the gateway sets on every sandbox.
const (
	// EnvToken carries the per-sandbox token the agent requires on every call but GET /health.
	EnvToken = "SANDGATE_AGENT_TOKEN"
	// EnvTokenFile names a file holding the token instead (read once at start).
	EnvTokenFile = "SANDGATE_AGENT_TOKEN_FILE"
	// EnvAddr overrides the listen address (default ":7777").
	EnvAddr = "SANDGATE_AGENT_ADDR"
	// EnvWorkspace is the workspace root (default /workspace).
	EnvWorkspace = "SANDGATE_WORKSPACE"
	// EnvCapabilities lists the profile's capabilities, comma separated (the agent starts the browser only if asked).
	EnvCapabilities = "SANDGATE_CAPABILITIES"
	// EnvSandboxID is the sandbox's id, for logs and /v1/info.
	EnvSandboxID = "SANDGATE_SANDBOX_ID"
	// EnvEnvFile is a file in the workspace the agent writes at each start, before it reports ready: one
	// `export NAME='value'` line for each variable EnvEnvFileNames lists (comma-separated), with the value the agent
	// was started with (Shipyard Neo's /workspace/.bay_env.sh, holding a profile's env).
	EnvEnvFile      = "SANDGATE_ENV_FILE"
	EnvEnvFileNames = "SANDGATE_ENV_FILE_NAMES"
)

// TokenHeader is where callers may put the token; "Authorization: Bearer <token>" works too.
const TokenHeader = "X-Sandgate-Token"

// Health is the body of GET /health: 200 with status "ok" once ready; 503 while the start-up is not done, with
// status starting or failed (StartupStarting, StartupFailed) and, when failed, why.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Error   string `json:"error,omitempty"`
}

// Info is the body of GET /v1/info.
type Info struct {
	Version       string   `json:"version"`
	SandboxID     string   `json:"sandbox_id,omitempty"`
	Capabilities  []string `json:"capabilities"`
	WorkspaceRoot string   `json:"workspace_root"`
	UptimeSeconds float64  `json:"uptime_seconds"`
	// Entrypoint is the image's own entrypoint the agent supervises, when the gateway injected the agent into an
	// image that is not ours.
	Entrypoint *EntrypointStatus `json:"entrypoint,omitempty"`
}

// EnvIDEAgent chooses who serves FastGPT's IDE protocol (ports 1318/1319) when IDE_AGENT_ENABLED=true: "ours"
// (the default: the agent does) or "image" (the agent leaves the ports to the IDE agent an injected image's own
// entrypoint starts, as FastGPT's image does).
const EnvIDEAgent = "SANDGATE_IDE_AGENT"

// ArgSupervise is the agent's first argument when it was injected into another image:
// `sandgate-agent supervise -- <the image's entrypoint and cmd...>`.
const ArgSupervise = "supervise"

// HomeSeedDir is where an injected sandbox sees, read-only, what its image keeps in HOME (/home/sandbox). HOME
// itself is a sized tmpfs, as in our images; the agent in supervise form copies the seed into it before it starts
// the image's entrypoint (FastGPT's image starts /home/sandbox/entrypoint.sh).
const HomeSeedDir = "/opt/sandgate-home"

// EntrypointStatus is the state of the supervised entrypoint. When it exits the agent exits with its status
// (128+signal for a signal), so the container's exit code is the entrypoint's.
type EntrypointStatus struct {
	Argv     []string `json:"argv"`
	PID      int      `json:"pid,omitempty"`
	Running  bool     `json:"running"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Error    string   `json:"error,omitempty"`
}
