// Package process runs commands whose lifetime is independent of the requests that started them: each process has
// an id, a ring buffer per output stream addressed by absolute offset, optional stdin, signals and a hard timeout
// that kills its whole process group. Ended processes are remembered for a retention period so clients can collect
// the result and output after a disconnect.
package process

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
)

// Config tunes a Manager.
type Config struct {
	// RingBytes is the replay buffer per stream (default agentapi.RingBytes).
	RingBytes int
	// Retention is how long an ended process stays queryable (default agentapi.ProcessRetentionSeconds).
	Retention time.Duration
	// MaxEnded caps how many ended processes are kept, oldest dropped first (default 256).
	MaxEnded int
	// MaxEndedBytes caps the output kept for ended processes, oldest dropped first (default 64 MiB), so a burst of
	// chatty commands cannot hold the sandbox's memory for the whole retention period.
	MaxEndedBytes int64
	// KillGrace is how long a process group has between SIGTERM and SIGKILL (default 2s).
	KillGrace time.Duration
	// WaitDelay is how long after the process exits its output pipes may stay open (held by a background child)
	// before the agent closes them (default 1s).
	WaitDelay time.Duration
	// BaseEnv is the environment every process starts from (default os.Environ()).
	BaseEnv []string
	Logger  *slog.Logger
}

// Manager owns the table of processes.
type Manager struct {
	cfg   Config
	mu    sync.Mutex
	procs map[string]*Process
	stop  chan struct{}
	once  sync.Once
}

// NewManager returns a Manager and starts its janitor; Close stops it and kills what still runs.
func NewManager(cfg Config) *Manager {
	if cfg.RingBytes <= 0 {
		cfg.RingBytes = agentapi.RingBytes
	}
	if cfg.Retention <= 0 {
		cfg.Retention = agentapi.ProcessRetentionSeconds * time.Second
	}
	if cfg.MaxEnded <= 0 {
		cfg.MaxEnded = 256
	}
	if cfg.MaxEndedBytes <= 0 {
		cfg.MaxEndedBytes = 64 << 20
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	if cfg.WaitDelay <= 0 {
		cfg.WaitDelay = time.Second
	}
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = os.Environ()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, procs: map[string]*Process{}, stop: make(chan struct{})}
	go m.janitor()
	return m
}

// Get returns the process with id, or not_found.
func (m *Manager) Get(id string) (*Process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[id]; ok {
		return p, nil
	}
	return nil, agentapi.Errorf(agentapi.CodeNotFound, "no process %q (ended processes are kept %s)", id, m.cfg.Retention).With("id", id)
}

// List returns every known process, oldest first.
func (m *Manager) List() []*Process {
	m.mu.Lock()
	out := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		out = append(out, p)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].started.Before(out[j].started) })
	return out
}

// Close kills every running process and stops the janitor.
func (m *Manager) Close() {
	m.once.Do(func() { close(m.stop) })
	for _, p := range m.List() {
		p.Kill()
	}
}

func (m *Manager) add(p *Process) {
	m.mu.Lock()
	m.procs[p.ID] = p
	m.mu.Unlock()
}

func (m *Manager) janitor() {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sweep(time.Now())
		}
	}
}

// sweep forgets processes ended longer than Retention ago, and the oldest ended ones beyond MaxEnded or
// MaxEndedBytes of output.
func (m *Manager) sweep(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ended []*Process
	for id, p := range m.procs {
		end, ok := p.endedAt()
		if !ok {
			continue
		}
		if now.Sub(end) > m.cfg.Retention {
			delete(m.procs, id)
			continue
		}
		ended = append(ended, p)
	}
	sort.Slice(ended, func(i, j int) bool { // newest first
		a, _ := ended[i].endedAt()
		b, _ := ended[j].endedAt()
		return a.After(b)
	})
	var held int64
	for i, p := range ended {
		held += p.stdout.Held() + p.stderr.Held()
		if i >= m.cfg.MaxEnded || (i > 0 && held > m.cfg.MaxEndedBytes) {
			delete(m.procs, p.ID)
		}
	}
}

func (m *Manager) newRing() *ring.Ring { return ring.New(m.cfg.RingBytes) }

// buildEnv layers extra over the base environment (later entries win) after validating names.
func buildEnv(base []string, defaults map[string]string, extra map[string]string) ([]string, error) {
	merged := map[string]string{}
	order := []string{}
	set := func(k, v string) {
		if _, ok := merged[k]; !ok {
			order = append(order, k)
		}
		merged[k] = v
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			set(k, v)
		}
	}
	for k, v := range defaults {
		set(k, v)
	}
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "invalid environment variable %q", k)
		}
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+merged[k])
	}
	return out, nil
}

// NewID returns a random id with a prefix ("proc_3f9a…").
func NewID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's RNG does not fail on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}
