package opensandbox

import (
	"testing"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// osbProfiles are OpenSandbox's profiles; anyimage (the fifth) runs FastGPT's own images with our agent injected.
var osbProfiles = []sandboxes.Profile{
	{ID: "base", Image: "sandgate/sandbox:base", Network: sandboxes.NetworkInternal, Resources: sandboxes.Resources{CPUs: 2, Memory: "4g"}},
	{ID: "sealed", Image: "sandgate/sandbox:sealed", Network: sandboxes.NetworkNone},
	{ID: "web", Image: "sandgate/sandbox:web", Network: sandboxes.NetworkBridge},
	{ID: "proxied", Image: "sandgate/sandbox:proxied", Network: sandboxes.NetworkInternal,
		Egress: &sandboxes.Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org", "*.example.com"}}},
	{ID: "anyimage", Image: "sandgate/sandbox:anyimage", Network: sandboxes.NetworkInternal, Resources: sandboxes.Resources{CPUs: 2, Memory: "4g"},
		AllowedImages: []string{"fastgpt-agent-sandbox:*", "registry.example/team/*:*"}},
}

// newManager is the real Manager over sandboxestest's engine with OpenSandbox's profiles: every sandbox's agent
// answers at agent, and a created sandbox is starting until the engine has started it and its agent answered.
func newManager(t *testing.T, agent string) (*sandboxes.Manager, *sandboxestest.Engine) {
	t.Helper()
	m, engine := sandboxestest.NewManager(t, sandboxes.Config{Profiles: osbProfiles})
	engine.AgentAddr = agent
	return m, engine
}
