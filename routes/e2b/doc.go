// Package e2b is the E2B dialect: E2B's control-plane API (sandboxes, timeouts, pause and connect, metrics,
// snapshots and fork) over sandboxes/service, and E2B's edge on the content origin, which admits
// {port}-{id}.{domain} requests with E2B's own credentials (the envd access token, the traffic access token, the
// signed file URLs) and forwards them to the agent's E2B prefixes (agentimage/agentapi/e2b.go) or to the
// sandbox's port. E2B's SDKs reach it unchanged with E2B_API_URL and E2B_DOMAIN (docs/e2b.md).
//
// What E2B keeps per sandbox (the template name, whether its ports are private, the sandbox-wide envVars) is
// metadata under a reserved prefix in the one store, owner-scoped with the sandbox. The tokens are not stored:
// they are derived from the sandbox's own secret (service.AccessKey), so a copy of the store opens nothing.
package e2b
