package agentapi

// The agent serves E2B's in-sandbox protocols behind the agent's own token, as it serves OpenSandbox's execd under
// ExecdPrefix: envd (Connect RPC process.Process and filesystem.Filesystem, and the REST routes /files, /health,
// /envs) under E2BEnvdPrefix, and the code interpreter's HTTP API (/execute, /contexts) under E2BCodePrefix. The
// gateway's E2B edge (routes/e2b) checks E2B's own credentials (X-Access-Token, e2b-traffic-access-token) against
// what it stored at create, then forwards the request with the path prefixed, so E2B's SDKs reach these unchanged
// at {49983|49999}-{id}.{domain}. ../shared/reference/e2b.md is the contract as the SDKs see it.
const (
	// E2BEnvdPrefix is where envd's routes live on the agent's port: envd's /process.Process/Start is
	// /e2b/envd/process.Process/Start here.
	E2BEnvdPrefix = "/e2b/envd"
	// E2BCodePrefix is where the code interpreter's routes live on the agent's port: /execute is /e2b/code/execute.
	E2BCodePrefix = "/e2b/code"

	// E2BEnvdPort and E2BCodePort are the sandbox ports E2B's SDKs address envd and the code interpreter on.
	E2BEnvdPort = 49983
	E2BCodePort = 49999

	// E2BEnvdVersion is the envd version the agent implements and the control plane reports as envdVersion. The
	// SDK gates features on it (reference/e2b.md §4.4), so it must name only what the agent really serves.
	E2BEnvdVersion = "0.6.4"

	// E2BEnvHeader carries the sandbox-wide environment (the create's envVars, JSON object) from the gateway to the
	// agent on every forwarded envd and code-interpreter request, so processes and kernels get it without the agent
	// storing tenant-independent state.
	E2BEnvHeader = "X-Sandgate-E2b-Env"
)
