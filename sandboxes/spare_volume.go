package sandboxes

import (
	"context"
	"time"
)

// A fork or a create from a snapshot copies into a new workspace volume. Creating a volume is an engine call that
// writes the engine's own volume database (10-40 ms on a busy host, several times the copy of a 10 MB workspace), so
// the Manager keeps one empty workspace volume made ahead of need and copies into it; the next one is made in the
// background once it is taken. The first copy after a start makes its own (no volume is made for a gateway that
// never forks). A spare is only ever a managed workspace volume under a random id that nobody has seen: a gateway
// that dies with one leaves an empty orphan, which the orphan sweep removes like any other.

// spareVolumes is guarded by Manager.mu.
type spareVolumes struct {
	ready   []string        // workspace ids whose volumes exist, empty and unclaimed
	held    map[string]bool // every spare or taken workspace id until its sandbox is recorded or its volume removed
	filling bool
}

// takeCopyTarget returns the workspace id a copy goes into. premade says its volume exists already (a spare,
// empty, with the labels of a managed workspace). The id is held (spared by the orphan sweep, refused to callers
// naming it) until done is called, which the caller does once the sandbox on it is recorded or the copy failed.
func (m *Manager) takeCopyTarget() (ws string, premade bool, done func()) {
	m.mu.Lock()
	if m.spares.held == nil {
		m.spares.held = map[string]bool{}
	}
	if n := len(m.spares.ready); n > 0 {
		ws, premade = m.spares.ready[n-1], true
		m.spares.ready = m.spares.ready[:n-1]
	} else {
		ws = "ws-" + randomHex(6)
		for m.spares.held[ws] {
			ws = "ws-" + randomHex(6)
		}
		m.spares.held[ws] = true
	}
	m.mu.Unlock()
	return ws, premade, func() {
		m.mu.Lock()
		delete(m.spares.held, ws)
		// The next spare is made after this copy, not beside it: the engine call would take CPU from the copy.
		m.refillSpareLocked()
		m.mu.Unlock()
	}
}

// refillSpareLocked makes a spare in the background unless one exists or is being made.
func (m *Manager) refillSpareLocked() {
	if m.spares.filling || len(m.spares.ready) > 0 || !m.started || m.closed {
		return
	}
	m.spares.filling = true
	ws := "ws-" + randomHex(6)
	for m.spares.held[ws] {
		ws = "ws-" + randomHex(6)
	}
	m.spares.held[ws] = true
	ctx := m.ctx
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := m.driver.CreateVolume(ctx, m.VolumeName(ws), m.volumeLabels(Record{WorkspaceID: ws, ManagedWorkspace: true}))
		m.mu.Lock()
		m.spares.filling = false
		keep := err == nil && !m.closed
		if keep {
			m.spares.ready = append(m.spares.ready, ws)
		} else {
			delete(m.spares.held, ws)
		}
		m.mu.Unlock()
		if err != nil {
			m.log.Warn("making a spare workspace volume for copies", "error", err)
		} else if !keep {
			m.removeSpare(ws)
		}
	}()
}

// spareHeldLocked says whether ws is a spare or a copy target not yet recorded.
func (m *Manager) spareHeldLocked(ws string) bool { return m.spares.held[ws] }

// removeSpares removes the unclaimed spares (Close: nothing else runs any more).
func (m *Manager) removeSpares() {
	m.mu.Lock()
	ready := m.spares.ready
	m.spares.ready = nil
	for _, ws := range ready {
		delete(m.spares.held, ws)
	}
	m.mu.Unlock()
	for _, ws := range ready {
		m.removeSpare(ws)
	}
}

func (m *Manager) removeSpare(ws string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.driver.RemoveVolume(ctx, m.VolumeName(ws)); err != nil {
		m.log.Warn("removing a spare workspace volume", "volume", m.VolumeName(ws), "error", err)
	}
}
