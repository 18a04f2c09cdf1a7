package main_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestAgentListsListeningPorts: GET /v1/ports reports what sandbox code listens on, read from the sandbox's own
// network namespace: python's http.server (on :: or 0.0.0.0, as the container's IPv6 allows), a loopback-only IPv4
// listener and an IPv6-only wildcard one, each with its bind address and scope; the agent's own port is marked
// reserved; a port closed again disappears.
func TestAgentListsListeningPorts(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell"}})
	ctx := testCtx(t)
	c := clientFor(sb)

	script := `import socket, sys, time
fam, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET)
if fam == "6":
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.bind((addr, port)); s.listen(); time.sleep(3600)`
	start := func(argv ...string) string {
		res, err := c.Exec(ctx, agentapi.ExecRequest{Argv: argv, YieldMS: 200})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusRunning {
			t.Fatalf("%v ended: %+v", argv, res)
		}
		return res.ID
	}
	start("python3", "-m", "http.server", "5173")
	loop4 := start("python3", "-c", script, "4", "127.0.0.1", "8081")
	start("python3", "-c", script, "6", "::", "8082")

	// Docker's default bridge gives containers no IPv6 address, but IPv6 sockets still bind to ::; the wildcard
	// binds of http.server and the agent (Go) may be either family.
	want := map[int]string{
		5173:                 "all ",
		8081:                 "127.0.0.1 loopback ",
		8082:                 ":: all ",
		agentapi.DefaultPort: "all it is the agent's own port",
	}
	describe := func(p agentapi.ListeningPort) string {
		if p.Port == 5173 || p.Port == agentapi.DefaultPort {
			if p.Address != "::" && p.Address != "0.0.0.0" {
				return "unexpected address " + p.Address
			}
			return fmt.Sprintf("%s %s", p.Scope, p.Reserved)
		}
		return fmt.Sprintf("%s %s %s", p.Address, p.Scope, p.Reserved)
	}
	var got agentapi.ListeningPorts
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		var err error
		if got, err = c.Ports(ctx); err != nil {
			t.Fatal(err)
		}
		seen := map[int]string{}
		for _, p := range got.Ports {
			if _, ok := want[p.Port]; ok {
				seen[p.Port] = describe(p)
			}
		}
		if fmt.Sprint(seen) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ports = %+v\nwant %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range got.Ports {
		// 8082 is left out: an IPV6_V6ONLY wildcard looks like any other in /proc (docs/agent-browser.md).
		wantProxied := p.Port == 5173 || p.Port == 8081
		if p.Port != agentapi.DefaultPort && !wantProxied {
			continue
		}
		if p.Proxied() != wantProxied {
			t.Errorf("port %d (%s): Proxied = %v", p.Port, describe(p), p.Proxied())
		}
	}

	// The listing is live: killing the loopback listener removes it.
	if _, err := c.KillProcess(ctx, loop4); err != nil {
		t.Fatal(err)
	}
	for {
		got, err := c.Ports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !hasPort(got, 8081) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("port 8081 still listed after its process was killed: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hasPort(l agentapi.ListeningPorts, port int) bool {
	for _, p := range l.Ports {
		if p.Port == port {
			return true
		}
	}
	return false
}
