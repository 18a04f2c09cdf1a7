package sandboxes

import (
	"sync"
	"time"
)

// Event types sent to subscribers.
const (
	EventCreated = "created" // a sandbox was created (cold) or claimed (warm)
	EventReady   = "ready"   // its agent answered /health
	EventStopped = "stopped" // compute stopped (idle or asked); workspace kept
	EventStarted = "started" // compute started again after a stop (followed by ready)
	EventDeleted = "deleted" // removed with its workspace (asked, expired or orphaned)
	EventDied    = "died"    // its container died without being asked to
	EventOOM     = "oom"     // a process in it was OOM-killed; the container lives on
	EventFailed  = "failed"  // it could not be started
	EventGC      = "gc"      // the collector removed something (Reason says what)
)

// Event is one lifecycle change.
type Event struct {
	Type       string        `json:"type"`
	SandboxID  string        `json:"sandbox_id,omitempty"`
	Profile    string        `json:"profile,omitempty"`
	Owner      string        `json:"owner,omitempty"`
	LaunchType string        `json:"launch_type,omitempty"`
	Warm       bool          `json:"warm,omitempty"` // the sandbox is a warm-pool member
	Reason     string        `json:"reason,omitempty"`
	Death      *Death        `json:"death,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"` // ready: time since create/start; created (warm): claim time
	At         time.Time     `json:"at"`
}

// Err is the typed error a stream of this sandbox should end with: container_died for a died event, nil for
// every other event.
func (ev Event) Err() error {
	if ev.Type != EventDied || ev.Death == nil {
		return nil
	}
	return diedError(ev.SandboxID, ev.Death)
}

// Fields are the event as an event bus's payload (Caddy's events app re-emits every event as sandbox_<type> with
// them): the sandbox, profile, owner, reason, launch type and warm flag always; duration_seconds when there is a
// duration; exit_code and message for a death.
func (ev Event) Fields() map[string]any {
	data := map[string]any{"sandbox_id": ev.SandboxID, "profile": ev.Profile, "owner": ev.Owner, "reason": ev.Reason,
		"launch_type": ev.LaunchType, "warm": ev.Warm}
	if ev.Duration > 0 {
		data["duration_seconds"] = ev.Duration.Seconds()
	}
	if ev.Death != nil {
		data["exit_code"] = ev.Death.ExitCode
		data["message"] = ev.Death.Message
	}
	return data
}

// Subscribe returns a channel of lifecycle events and a function that ends the subscription. A subscriber that
// does not keep up loses events rather than slowing the Manager.
func (m *Manager) Subscribe(buffer int) (<-chan Event, func()) {
	if buffer < 1 {
		buffer = 1
	}
	ch := make(chan Event, buffer)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	id := m.nextSub
	m.nextSub++
	m.subs[id] = ch
	m.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			m.mu.Lock()
			if c, ok := m.subs[id]; ok {
				delete(m.subs, id)
				close(c)
			}
			m.mu.Unlock()
		})
	}
}

func (m *Manager) emit(ev Event) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.emitLocked(ev)
}

// emitLocked sends to subscribers; the caller holds m.mu (read or write).
func (m *Manager) emitLocked(ev Event) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	for _, ch := range m.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}
