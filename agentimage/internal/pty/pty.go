// Package pty keeps interactive terminal sessions that outlive their WebSocket: a session's output stays in a
// replay ring, one client holds the session at a time (another may take it over), and a session nobody holds ends
// after its idle TTL.
package pty

import (
	"sort"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

// Manager owns PTY sessions; their processes live in a process.Manager (so they also show in /v1/processes).
type Manager struct {
	procs    *process.Manager
	mu       sync.Mutex
	sessions map[string]*Session
	stop     chan struct{}
	once     sync.Once
	// sweepEvery is how often idle sessions are looked for.
	sweepEvery time.Duration
}

// NewManager returns a Manager and starts its idle sweeper; Close stops it.
func NewManager(procs *process.Manager) *Manager {
	m := &Manager{procs: procs, sessions: map[string]*Session{}, stop: make(chan struct{}), sweepEvery: 5 * time.Second}
	go m.sweeper()
	return m
}

// Spec is a session to create; Dir is already resolved.
type Spec struct {
	Cmd     string
	Argv    []string
	Dir     string
	Env     map[string]string
	Cols    uint16
	Rows    uint16
	IdleTTL time.Duration
}

// Session is one terminal.
type Session struct {
	ID      string
	Proc    *process.Process
	Cmd     string
	IdleTTL time.Duration
	Created time.Time

	mu         sync.Mutex
	cols, rows uint16
	holder     *Holder
	idleSince  time.Time
}

// Holder is a client's hold on a session. Kicked is closed when another client takes the session over.
type Holder struct {
	kicked chan struct{}
	once   sync.Once
}

// Kicked is closed when the hold was taken over.
func (h *Holder) Kicked() <-chan struct{} { return h.kicked }

func (h *Holder) kick() { h.once.Do(func() { close(h.kicked) }) }

// Create starts a session.
func (m *Manager) Create(spec Spec) (*Session, error) {
	if spec.Cols == 0 {
		spec.Cols = agentapi.DefaultPTYCols
	}
	if spec.Rows == 0 {
		spec.Rows = agentapi.DefaultPTYRows
	}
	if spec.IdleTTL <= 0 {
		spec.IdleTTL = agentapi.DefaultPTYIdleTTLSeconds * time.Second
	}
	argv := spec.Argv
	if spec.Cmd == "" && len(argv) == 0 {
		argv = []string{"/bin/bash", "-l"}
	}
	p, err := m.procs.Start(process.Spec{
		Cmd: spec.Cmd, Argv: argv, Dir: spec.Dir, Env: spec.Env, Tag: "pty",
		PTY: &agentapi.PTYSize{Cols: spec.Cols, Rows: spec.Rows},
	})
	if err != nil {
		return nil, err
	}
	s := &Session{ID: process.NewID("pty_"), Proc: p, Cmd: spec.Cmd, IdleTTL: spec.IdleTTL, Created: time.Now(),
		cols: spec.Cols, rows: spec.Rows, idleSince: time.Now()}
	m.mu.Lock()
	m.sessions[s.ID] = s
	m.mu.Unlock()
	return s, nil
}

// Get returns a session or not_found.
func (m *Manager) Get(id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok {
		return s, nil
	}
	return nil, agentapi.Errorf(agentapi.CodeNotFound, "no PTY session %q", id).With("id", id)
}

// List returns sessions, oldest first.
func (m *Manager) List() []*Session {
	m.mu.Lock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Delete kills a session's process and forgets it; a client holding it sees the exit.
func (m *Manager) Delete(id string) error {
	m.mu.Lock()
	s, ok := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if !ok {
		return agentapi.Errorf(agentapi.CodeNotFound, "no PTY session %q", id).With("id", id)
	}
	s.Proc.Kill()
	return nil
}

// Close kills every session and stops the sweeper.
func (m *Manager) Close() {
	m.once.Do(func() { close(m.stop) })
	for _, s := range m.List() {
		_ = m.Delete(s.ID)
	}
}

func (m *Manager) sweeper() {
	t := time.NewTicker(m.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			for _, s := range m.List() {
				if s.idleFor(now) > s.IdleTTL {
					_ = m.Delete(s.ID)
				}
			}
		}
	}
}

// Attach makes the caller the session's holder. If another client holds it, Attach answers conflict unless
// takeover is set, in which case the old holder is kicked.
func (s *Session) Attach(takeover bool) (*Holder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != nil {
		if !takeover {
			return nil, agentapi.Errorf(agentapi.CodeConflict, "PTY session %s is attached to another client (reconnect with takeover=1 to take it over)", s.ID)
		}
		s.holder.kick()
	}
	s.holder = &Holder{kicked: make(chan struct{})}
	return s.holder, nil
}

// Detach releases h's hold (a no-op if it was taken over) and starts the idle clock.
func (s *Session) Detach(h *Holder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder == h {
		s.holder = nil
		s.idleSince = time.Now()
	}
}

func (s *Session) idleFor(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != nil {
		return 0
	}
	return now.Sub(s.idleSince)
}

// Resize changes the terminal size.
func (s *Session) Resize(cols, rows uint16) error {
	if cols == 0 || rows == 0 {
		return agentapi.Errorf(agentapi.CodeInvalidRequest, "resize needs cols and rows above 0")
	}
	if err := s.Proc.Resize(cols, rows); err != nil {
		return err
	}
	s.mu.Lock()
	s.cols, s.rows = cols, rows
	s.mu.Unlock()
	return nil
}

// Info describes the session.
func (s *Session) Info() agentapi.PTYSession {
	st := s.Proc.State()
	_, end, _ := s.Proc.Stdout().Bounds()
	s.mu.Lock()
	defer s.mu.Unlock()
	return agentapi.PTYSession{
		ID: s.ID, PID: s.Proc.PID, Cmd: s.Cmd, Cols: s.cols, Rows: s.rows, Status: st.Status, ExitCode: st.ExitCode,
		Offset: end, Attached: s.holder != nil, IdleTTLSeconds: int(s.IdleTTL / time.Second),
		CreatedAt: s.Created.UTC().Format(time.RFC3339Nano), WebSocketPath: "/v1/pty/" + s.ID + "/ws",
	}
}
