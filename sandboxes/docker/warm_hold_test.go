package docker_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
	"github.com/sandgate/sandgate/sandboxes"
)

// On the real engine and agent, the refill a warm claim triggers waits for the claimed sandbox's first exec (made
// as the API makes it, on the Manager's agent connection pool), and runs once that exec has answered.
func TestClaimRefillWaitsForTheFirstExecOnTheEngine(t *testing.T) {
	w := smallProfile("w", "")
	w.WarmPoolSize = 1
	h := newHarness(t, sandboxes.Config{Profiles: []sandboxes.Profile{w}, WarmRefillHold: time.Hour, GCInterval: time.Hour})
	testenv.WaitUntil(t, "the pool's member", func() bool { return h.mgr.WarmReady() == 1 })
	sb := h.create("w")
	if sb.LaunchType != sandboxes.LaunchWarm {
		t.Fatalf("not a warm claim: %+v", sb)
	}
	tg := h.ready(sb.ID)
	if s := poolStats(t, h.mgr, "w"); s.HeldRefills != 1 || s.Ready+s.Starting != 0 {
		t.Fatalf("after the claim, before any call: %+v", s)
	}
	res, err := agentapi.NewClientFor(tg.Addr, tg.Token, h.mgr.AgentHTTPClient()).Exec(context.Background(),
		agentapi.ExecRequest{Argv: []string{"true"}})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("first exec: %v %+v", err, res)
	}
	testenv.WaitUntil(t, "the refill after the first exec", func() bool {
		s := poolStats(t, h.mgr, "w")
		return s.HeldRefills == 0 && s.Ready == 1
	})
}
