package process

import (
	"testing"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// TestManagerRetention runs real short commands and checks ended records are bounded by count, bytes and age.
func TestManagerRetention(t *testing.T) {
	dir := t.TempDir()
	m := NewManager(Config{MaxEnded: 3, MaxEndedBytes: 1 << 20, Retention: time.Hour})
	defer m.Close()
	var ids []string
	for i := 0; i < 5; i++ {
		p, err := m.Start(Spec{Argv: []string{"/bin/sh", "-c", "head -c 600000 /dev/zero"}, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		ids = append(ids, p.ID)
		time.Sleep(5 * time.Millisecond) // distinct end times
	}
	// 600 kB of output each against a 1 MiB budget: only the newest record fits
	if _, err := m.Get(ids[4]); err != nil {
		t.Fatalf("newest record dropped: %v", err)
	}
	if _, err := m.Get(ids[3]); err == nil {
		t.Fatal("byte budget not enforced")
	}
	m.sweep(time.Now().Add(2 * time.Hour))
	if len(m.List()) != 0 {
		t.Fatal("retention not enforced")
	}
}

func TestStartErrorsAreTyped(t *testing.T) {
	m := NewManager(Config{})
	defer m.Close()
	for _, spec := range []Spec{{}, {Cmd: "true", Argv: []string{"true"}}, {Argv: []string{"no-such-command-here"}}, {Cmd: "true", Env: map[string]string{"A=B": "x"}}} {
		_, err := m.Start(spec)
		if e, ok := err.(*agentapi.Error); !ok || e.Code != agentapi.CodeInvalidRequest {
			t.Fatalf("%+v: want invalid_request, got %v", spec, err)
		}
	}
}
