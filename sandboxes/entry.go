package sandboxes

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// entry is one sandbox in memory. Fields are guarded by Manager.mu except where noted.
type entry struct {
	rec     Record
	profile Profile // the profile as it was when the container was shaped

	ready         chan struct{} // closed when the current start attempt ends (ready or failed)
	launching     bool
	adopting      bool // a launch that re-attaches to a container found running at start keeps its idle deadline
	cancelLaunch  context.CancelFunc
	leases        int
	expectStop    bool          // we are stopping or removing it: its die event is no crash
	stopping      chan struct{} // non-nil while a stop committed to stopping it runs; closed when it ends
	stopRequested bool          // a stop cancelled the launch in flight
	recovering    bool          // the launch in flight rebuilds a dead container (recovery.go)
	deleted       bool
	lastOOM       time.Time
	// launchErr is the typed error of the last failed launch, if it carried one; LastError keeps only its text
	// (and is all a record loaded from the store has).
	launchErr   *Error
	lastPersist time.Time
	startBegan  time.Time
	// The warm pool's bookkeeping (warm.go): refill marks a launch made for the pool and not claimed yet;
	// freshLaunch one that makes a new container; launchLevel the launches working on the engine when it got its
	// start slot (active, since activeAt); after delays
	// its engine calls until the sandbox it replaces is gone; done is closed once a detached entry is destroyed.
	refill      bool
	freshLaunch bool
	launchLevel int
	active      bool
	activeAt    time.Time
	after       <-chan struct{}
	done        chan struct{}
	freedDone   bool
	// remoteBusy: another gateway of a fleet is creating or starting it (shared.go); remoteWake is closed at the
	// next change that gateway makes.
	remoteBusy bool
	remoteWake chan struct{}

	opMu      sync.Mutex // serialises engine operations on this sandbox (launch, stop, delete)
	persistMu sync.Mutex // orders store writes of this sandbox
	// stored is the record as the store last took it (JSON), guarded by persistMu: flushAll writes only the
	// records that differ from it, so a collector pass over n idle sandboxes costs no store write at all.
	stored []byte
	// touched: the idle deadline moved in memory since flushAll last looked (setIdleDeadline). Every other change
	// to a record is written at once (persist), so a pass's flush compares only these.
	touched atomic.Bool
}

// The helpers below read or change entries; callers hold m.mu.

// visible: e is a sandbox callers may see. Warm-pool members are the pool's, and a deleted entry is on its way out.
func visible(e *entry) bool { return e != nil && !e.rec.Warm && !e.deleted }

// visibleLocked is the sandbox id names, or not_found.
func (m *Manager) visibleLocked(id string) (*entry, error) {
	e := m.entries[id]
	if !visible(e) {
		return nil, notFound(id)
	}
	return e, nil
}

// liveLocked is the sandbox id names that callers may act on: not_found, or expired past its TTL.
func (m *Manager) liveLocked(id string, now time.Time) (*entry, error) {
	e, err := m.visibleLocked(id)
	if err != nil {
		return nil, err
	}
	if expired(e, now) {
		return nil, expiredError(id)
	}
	return e, nil
}

// resolvableLocked: e is a live sandbox whose agent answers now (running, not dead, not expired).
func (m *Manager) resolvableLocked(e *entry, now time.Time) bool {
	return visible(e) && e.rec.Phase == PhaseRunning && e.rec.Died == nil && !expired(e, now)
}

func statusOf(e *entry, now time.Time) Status {
	switch {
	case expired(e, now):
		return StatusExpired
	case e.rec.Phase == PhaseFailed:
		return StatusFailed
	case e.rec.Phase == PhaseRunning:
		return StatusReady
	case e.rec.Phase == PhasePaused:
		return StatusPaused
	case e.rec.Phase == PhaseCreating || e.rec.Phase == PhaseStarting:
		return StatusStarting
	default:
		return StatusIdle
	}
}

// expired: past its TTL, and not a sandbox whose TTL pauses or stops it (expiry.go), which stays live until the
// collector has done that (at once: its timer fires at the TTL).
func expired(e *entry, now time.Time) bool {
	return pastTTL(e, now) && (e.rec.OnExpire == "" || e.rec.ExpiredAt != nil)
}

func pastTTL(e *entry, now time.Time) bool {
	return e.rec.ExpiresAt != nil && !now.Before(*e.rec.ExpiresAt)
}

func (m *Manager) snapshotLocked(e *entry, now time.Time) *Sandbox {
	sb := &Sandbox{
		ID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Status: statusOf(e, now),
		Capabilities: slices.Clone(e.profile.Capabilities), WorkspaceID: e.rec.WorkspaceID, CreatedAt: e.rec.CreatedAt,
		LaunchType: e.rec.LaunchType, LastError: e.rec.LastError, Metadata: maps.Clone(e.rec.Metadata),
		Egress: cloneEgress(e.rec.Egress), OnExpire: e.rec.OnExpire,
	}
	if e.rec.ExpiredAt != nil {
		t := *e.rec.ExpiredAt
		sb.ExpiredAt = &t
	}
	if sb.Capabilities == nil {
		sb.Capabilities = []string{}
	}
	if e.rec.ExpiresAt != nil {
		t := *e.rec.ExpiresAt
		sb.ExpiresAt = &t
	}
	if e.rec.IdleExpiresAt != nil && (e.rec.Phase == PhaseRunning || e.rec.Phase == PhasePaused) {
		t := *e.rec.IdleExpiresAt
		sb.IdleExpiresAt = &t
	}
	if e.rec.Died != nil {
		d := *e.rec.Died
		sb.Died = &d
	}
	return sb
}

func (m *Manager) targetLocked(e *entry) Target {
	return Target{SandboxID: e.rec.ID, Addr: e.rec.Addr, Token: e.rec.Token, AppPort: e.profile.AppTarget()}
}

func (m *Manager) touchLocked(e *entry, now time.Time) {
	if e.rec.Phase == PhaseRunning || e.rec.Phase == PhaseStarting {
		setIdleDeadline(e, now)
	}
}

func setIdleDeadline(e *entry, now time.Time) {
	e.touched.Store(true)
	if idle := e.profile.IdleTimeout.Std(); idle > 0 {
		t := now.Add(idle)
		e.rec.IdleExpiresAt = &t
	} else {
		e.rec.IdleExpiresAt = nil
	}
}

func (m *Manager) ownerCountLocked(owner string, now time.Time) int {
	n := 0
	for _, e := range m.entries {
		if visible(e) && e.rec.Owner == owner && !expired(e, now) {
			n++
		}
	}
	return n
}

func (m *Manager) profileIDsLocked() []string {
	ids := make([]string, 0, len(m.profiles))
	for id := range m.profiles {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// persist writes e's record; writes of one sandbox never reorder. A failed write is logged and returned: Create
// answers with it (the sandbox would not outlive a restart), the other callers keep the state in memory, which
// flushAll writes again (e.stored is cleared).
func (m *Manager) persist(e *entry) error {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	m.mu.Lock()
	if e.deleted {
		m.mu.Unlock()
		return nil
	}
	rec := e.rec
	e.lastPersist = time.Now()
	m.mu.Unlock()
	if err := m.store.Put(rec); err != nil {
		m.log.Error("writing the sandbox store", "sandbox", rec.ID, "error", err)
		e.stored = nil
		return err
	}
	e.stored, _ = json.Marshal(rec)
	return nil
}

// flushAll writes the records that changed since their last write (idle deadlines that Touch keeps in memory
// between its throttled writes) in one store transaction. It used to write every record, one fsync each in turn,
// which made each collector pass cost n fsyncs: 300 idle sandboxes took seconds per pass. It then compared every
// record with its last write, n JSON encodings a pass; now it compares the touched ones and those never written,
// and all of them only when full (at Close, and once per orphan_min_age with the orphan sweep: the check that a
// change written nowhere else still reaches the store).
func (m *Manager) flushAll(full bool) {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.RLock()
	all := make([]*entry, 0, len(m.entries))
	for _, e := range m.entries {
		all = append(all, e)
	}
	m.mu.RUnlock()
	var held []*entry
	var recs []Record
	var blobs [][]byte
	defer func() {
		for _, e := range held {
			e.persistMu.Unlock()
		}
	}()
	for _, e := range all {
		// Hold the writes of each changed sandbox until the batch is in: a persist or a delete of the same
		// sandbox waits, so the batch never puts back an older record or a deleted one.
		e.persistMu.Lock()
		// Cleared before the record is read: a touch after this read marks it again for the next flush.
		if touched := e.touched.Swap(false); !full && !touched && e.stored != nil {
			e.persistMu.Unlock()
			continue
		}
		m.mu.RLock()
		deleted, rec := e.deleted, e.rec
		m.mu.RUnlock()
		b, err := json.Marshal(rec)
		if deleted || (err == nil && bytes.Equal(b, e.stored)) {
			e.persistMu.Unlock()
			continue
		}
		held, recs, blobs = append(held, e), append(recs, rec), append(blobs, b)
	}
	if len(recs) == 0 {
		return
	}
	if err := putRecords(m.store, recs); err != nil {
		m.log.Error("writing the sandbox store", "records", len(recs), "error", err)
		for _, e := range held {
			e.touched.Store(true) // the next pass tries again
		}
		return
	}
	now := time.Now()
	m.mu.Lock()
	for _, e := range held {
		e.lastPersist = now
	}
	m.mu.Unlock()
	for i, e := range held {
		e.stored = blobs[i]
	}
}
