package sandboxes

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"
)

// A fleet of gateways fronts one cluster: each gateway's Manager keeps its sandboxes in memory, as one gateway
// does, and follows the records the others write into the shared store (the Kubernetes API). This file holds the
// store's side of that contract and how the Manager applies what others changed. A Store that is not a
// SharedStore (BoltStore, one file per gateway) changes nothing here: the Docker path stays as it is.

// RecordChange is one change another gateway made to the shared records.
type RecordChange struct {
	ID string
	// Record is the record as it is now; zero when Deleted.
	Record  Record
	Deleted bool
}

// SharedStore is a Store that several gateways write at once.
type SharedStore interface {
	Store
	// Identity names this gateway among those sharing the store (the GC lease's holder identity); warm members are
	// recorded with it (Record.Gateway), so each gateway claims only the members it made.
	Identity() string
	// InitMeta sets key to value unless it is set already, and answers the value that holds: two gateways that
	// start at once agree on one.
	InitMeta(key, value string) (string, error)
	// Follow calls apply, one change at a time and in the store's order, for every change another gateway makes
	// after Load, until ctx ends. While it runs, the store also takes part in choosing the GC leader.
	Follow(ctx context.Context, apply func(RecordChange))
	// Leading reports whether this gateway holds the GC lease now: only the holder stops idle sandboxes, removes
	// expired ones, recycles old warm members and sweeps orphans.
	Leading() bool
	// Fresh reads every record from the source of truth, not from a cache that may lag a write made a moment ago
	// by another gateway. The orphan sweep asks it before it removes anything.
	Fresh(ctx context.Context) ([]Record, error)
}

// shared is the Manager's store as a SharedStore, or nil.
func (m *Manager) shared() SharedStore {
	s, _ := m.store.(SharedStore)
	return s
}

// gcLeader reports whether this Manager runs the collector's destructive parts: always with a store of its own.
func (m *Manager) gcLeader() bool {
	if s := m.shared(); s != nil {
		return s.Leading()
	}
	return true
}

// GCLeader reports whether this gateway runs the collector's destructive parts (always true outside a fleet).
func (m *Manager) GCLeader() bool { return m.gcLeader() }

// ownWarm reports whether a warm record was made by this gateway (every record is, outside a fleet).
func (m *Manager) ownWarm(rec Record) bool {
	s := m.shared()
	return s == nil || rec.Gateway == s.Identity()
}

// followShared applies the other gateways' changes until the Manager closes.
func (m *Manager) followShared(s SharedStore) {
	defer m.wg.Done()
	s.Follow(m.ctx, m.applyRemote)
}

// applyRemote applies one change another gateway made. No engine call is made here: the gateway that made the
// change made the engine calls that go with it.
func (m *Manager) applyRemote(ch RecordChange) {
	if ch.Deleted {
		m.forgetRemote(ch.ID)
		return
	}
	rec := ch.Record
	if rec.ID == "" {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	now := time.Now()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	e := m.entries[rec.ID]
	if e == nil {
		if rec.Warm && !m.ownWarm(rec) {
			// Another gateway's warm member: its maker claims it; until then it is none of this gateway's business.
			m.mu.Unlock()
			return
		}
		e = &entry{rec: rec, lastPersist: now, stored: b}
		m.setProfileLocked(e)
		m.markRemoteLocked(e)
		m.entries[rec.ID] = e
		m.indexLocked(e)
		m.mu.Unlock()
		return
	}
	if e.deleted || e.launching || e.stopping != nil {
		// This gateway is working on it right now: its own outcome is written next, and is the later word.
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	if bytes.Equal(b, e.stored) {
		return // what this gateway holds already (its own write, or the same state reached twice)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.deleted || e.launching || e.stopping != nil {
		return
	}
	if cur := e.rec.IdleExpiresAt; cur != nil && rec.IdleExpiresAt != nil && rec.Phase == e.rec.Phase && cur.After(*rec.IdleExpiresAt) {
		// Activity this gateway saw and has not written yet: the later deadline wins, and flushAll writes it.
		t := *cur
		rec.IdleExpiresAt = &t
	}
	wasWarm := e.rec.Warm
	m.setRecordLocked(e, rec)
	e.stored = b
	m.setProfileLocked(e)
	if wasWarm && !rec.Warm {
		// Claimed through another gateway (a member this one made and lost the race for): it is a sandbox now.
		if ids := m.warm[rec.ProfileHash]; len(ids) > 0 {
			m.warm[rec.ProfileHash] = slices.DeleteFunc(ids, func(x string) bool { return x == rec.ID })
		}
	}
	m.markRemoteLocked(e)
}

// forgetRemote takes a sandbox another gateway deleted out of memory. Its container and workspace are that
// gateway's to remove, and are gone or going already.
func (m *Manager) forgetRemote(id string) {
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.deleted {
		m.mu.Unlock()
		return
	}
	e.deleted = true
	e.expectStop = true
	if e.cancelLaunch != nil {
		e.cancelLaunch()
	}
	delete(m.entries, id)
	m.unindexLocked(e)
	if ids := m.warm[e.rec.ProfileHash]; len(ids) > 0 {
		m.warm[e.rec.ProfileHash] = slices.DeleteFunc(ids, func(x string) bool { return x == id })
	}
	if e.remoteWake != nil {
		close(e.remoteWake)
		e.remoteWake = nil
	}
	rec := e.rec
	m.mu.Unlock()
	m.emit(Event{Type: EventDeleted, SandboxID: rec.ID, Profile: rec.Profile, Owner: rec.Owner, Warm: rec.Warm, Reason: "deleted_elsewhere"})
}

// setProfileLocked gives e the shape its record was made with, as reconcile does.
func (m *Manager) setProfileLocked(e *entry) {
	if e.rec.Spec != nil {
		e.profile = *e.rec.Spec
	} else if p, ok := m.profiles[e.rec.Profile]; ok {
		e.profile = p
	}
}

// markRemoteLocked notes that e's state came from another gateway and wakes requests waiting for it. A sandbox
// another gateway is creating or starting is that gateway's to bring up: a request here waits for its next
// change (EnsureRunning) instead of launching a second start of the same container.
func (m *Manager) markRemoteLocked(e *entry) {
	if e.remoteWake != nil {
		close(e.remoteWake)
		e.remoteWake = nil
	}
	e.remoteBusy = e.rec.Phase == PhaseCreating || e.rec.Phase == PhaseStarting
	if e.remoteBusy {
		e.remoteWake = make(chan struct{})
	}
}
