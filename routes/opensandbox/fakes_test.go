package opensandbox

import (
	"fmt"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/sandboxestest"
)

// newFake is the core's test double with OpenSandbox's profiles: every sandbox's agent answers at agent, and a
// created sandbox is "sandbox-<n in hex>", starting.
func newFake(agent string) *sandboxestest.Core {
	f := sandboxestest.New([]sandboxes.Profile{
		{ID: "base", Image: "sandgate/sandbox:base", Network: sandboxes.NetworkInternal, Resources: sandboxes.Resources{CPUs: 2, Memory: "4g"}},
		{ID: "sealed", Image: "sandgate/sandbox:sealed", Network: sandboxes.NetworkNone},
		{ID: "web", Image: "sandgate/sandbox:web", Network: sandboxes.NetworkBridge},
		{ID: "proxied", Image: "sandgate/sandbox:proxied", Network: sandboxes.NetworkInternal,
			Egress: &sandboxes.Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org", "*.example.com"}}},
		{ID: "anyimage", Image: "sandgate/sandbox:anyimage", Network: sandboxes.NetworkInternal, Resources: sandboxes.Resources{CPUs: 2, Memory: "4g"},
			AllowedImages: []string{"fastgpt-agent-sandbox:*", "registry.example/team/*:*"}},
	})
	f.AgentAddr = agent
	f.CreatedStatus = sandboxes.StatusStarting
	f.NewID = func(n int, _ sandboxes.CreateRequest) string { return fmt.Sprintf("sandbox-%012x", n) }
	return f
}
