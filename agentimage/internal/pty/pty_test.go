package pty

import (
	"errors"
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

func TestHoldersAndIdleSweep(t *testing.T) {
	procs := process.NewManager(process.Config{})
	defer procs.Close()
	m := &Manager{procs: procs, sessions: map[string]*Session{}, stop: make(chan struct{}), sweepEvery: 20 * time.Millisecond}
	go m.sweeper()
	defer m.Close()

	s, err := m.Create(Spec{Argv: []string{"sleep", "60"}, Dir: t.TempDir(), IdleTTL: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	var e *agentapi.Error
	if _, err := s.Attach(false); !errors.As(err, &e) || e.Code != agentapi.CodeConflict {
		t.Fatalf("second holder: want conflict, got %v", err)
	}
	second, err := s.Attach(true)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Kicked():
	default:
		t.Fatal("takeover did not kick the first holder")
	}
	s.Detach(first) // late detach of the kicked holder must not release the new one
	time.Sleep(400 * time.Millisecond)
	if _, err := m.Get(s.ID); err != nil {
		t.Fatalf("held session swept: %v", err)
	}
	if !s.Info().Attached {
		t.Fatal("session not attached")
	}
	s.Detach(second)
	select {
	case <-s.Proc.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("idle session's process not ended")
	}
	if _, err := m.Get(s.ID); err == nil {
		t.Fatal("idle session still listed")
	}
}
