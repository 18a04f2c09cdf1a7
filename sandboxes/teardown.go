package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// DestroyAll removes every sandbox of this Manager with its workspace (on_exit destroy).
func (m *Manager) DestroyAll(ctx context.Context) error {
	m.mu.RLock()
	ids := make([]string, 0, len(m.entries))
	for id := range m.entries {
		ids = append(ids, id)
	}
	m.mu.RUnlock()
	var errs []error
	for _, id := range ids {
		if err := m.remove(ctx, id, "shutdown"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops a sandbox's compute and keeps its workspace. Stopping a stopped sandbox does nothing.
func (m *Manager) Stop(ctx context.Context, id string) error {
	m.mu.Lock()
	e, err := m.visibleLocked(id)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if e.rec.Phase == PhaseStopped || (e.rec.Phase == PhaseFailed && e.rec.Died != nil) {
		// A crash-looped sandbox stays failed: stopping it must not make it restartable.
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	return m.stop(ctx, e, "requested")
}

// Delete removes a sandbox, its container and its managed workspace volume. Deleting a missing sandbox is not an
// error.
func (m *Manager) Delete(ctx context.Context, id string) error {
	return m.remove(ctx, id, "deleted")
}

// stop stops e's compute, keeping container and workspace.
func (m *Manager) stop(ctx context.Context, e *entry, reason string) error {
	return m.stopIf(ctx, e, reason, nil)
}

// errNoLongerIdle is stopIf's answer when a lease or activity arrived between the collector's scan and the stop.
var errNoLongerIdle = errors.New("sandbox is no longer idle")

// stopIf stops e when still(e) holds under the lock (nil: always). The check and the commitment to stop are one
// critical section, so a request that takes a lease (Hold, Acquire) either stops the stop or, arriving later, finds
// e.stopping and waits for it to end before starting the sandbox again: it never gets a container being stopped.
func (m *Manager) stopIf(ctx context.Context, e *entry, reason string, still func(*entry) bool) error {
	m.mu.Lock()
	if e.cancelLaunch != nil {
		e.stopRequested = true
		e.cancelLaunch()
	}
	m.mu.Unlock()
	e.opMu.Lock()
	defer e.opMu.Unlock()
	m.mu.Lock()
	if e.deleted || (e.rec.Phase == PhaseStopped && e.rec.ContainerID == "") {
		m.mu.Unlock()
		return nil
	}
	if still != nil && !still(e) {
		m.mu.Unlock()
		return errNoLongerIdle
	}
	cid := e.rec.ContainerID
	grace := m.cfg.StopGrace
	e.expectStop = true
	stopping := make(chan struct{})
	e.stopping = stopping
	m.mu.Unlock()
	var err error
	if cid != "" {
		err = m.driver.Stop(ctx, cid, grace)
	}
	m.mu.Lock()
	e.expectStop = false
	e.stopping = nil
	close(stopping)
	if err == nil {
		e.rec.Phase = PhaseStopped
		e.rec.IdleExpiresAt = nil
		m.setAddrLocked(e, "")
		e.rec.Died = nil // a stopped dead sandbox starts afresh; its death stays in Crashes and LastError
	}
	m.mu.Unlock()
	if err != nil {
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("stopping sandbox %s", e.rec.ID), Err: err}
	}
	m.persist(e)
	m.emit(Event{Type: EventStopped, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Reason: reason})
	return nil
}

// remove deletes a sandbox by id: container, managed workspace volume, record.
func (m *Manager) remove(ctx context.Context, id, reason string) error {
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.deleted {
		m.mu.Unlock()
		return nil
	}
	m.detachLocked(e)
	m.mu.Unlock()
	// From here the sandbox is in no index, so no later call can find it to retry: the removal must not end with
	// its caller. A client that gave up mid-delete (a timeout, a closed connection) used to cancel the engine calls
	// half-way and leave the container or the workspace volume, and the record, behind (issue 34's soak found it).
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	return m.destroy(dctx, e, reason)
}

// removeTimeout bounds a delete's engine calls once they no longer depend on the caller.
const removeTimeout = 2 * time.Minute

// detachLocked takes e out of every in-memory index; its engine objects are destroyed next.
func (m *Manager) detachLocked(e *entry) {
	if !e.deleted {
		// Its place under max_sandboxes is free once destroy is done (heldLocked).
		e.done = make(chan struct{})
		m.freeing = append(m.freeing, e)
	}
	e.deleted = true
	e.expectStop = true
	if e.cancelLaunch != nil {
		e.cancelLaunch()
	}
	m.removing[e.rec.ID] = e // until destroy ends
	delete(m.entries, e.rec.ID)
	m.unindexLocked(e)
	m.holds.drop(e.rec.ID)
	if ids := m.warm[e.rec.ProfileHash]; len(ids) > 0 {
		m.warm[e.rec.ProfileHash] = slices.DeleteFunc(ids, func(x string) bool { return x == e.rec.ID })
	}
}

func (m *Manager) destroyDetached(e *entry, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.destroy(ctx, e, reason); err != nil {
		m.log.Warn("removing sandbox", "sandbox", e.rec.ID, "error", err)
	}
}

func (m *Manager) destroy(ctx context.Context, e *entry, reason string) error {
	defer m.freed(e)
	defer m.removed(e)
	e.opMu.Lock()
	defer e.opMu.Unlock()
	m.mu.RLock()
	rec := e.rec
	m.mu.RUnlock()
	var errs []error
	if rec.ContainerID != "" {
		if err := m.driver.Remove(ctx, rec.ContainerID); err != nil {
			errs = append(errs, fmt.Errorf("removing container: %w", err))
		}
	}
	if rec.ManagedWorkspace {
		if err := m.driver.RemoveVolume(ctx, m.VolumeName(rec.WorkspaceID)); err != nil {
			errs = append(errs, fmt.Errorf("removing workspace volume: %w", err))
		}
	}
	if err := m.removeSocketDir(rec.ID); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		// Keep the record: the orphan sweep and the next delete retry; meanwhile the sandbox is gone for callers.
		return &Error{Code: CodeEngine, Message: fmt.Sprintf("removing sandbox %s", rec.ID), Err: errors.Join(errs...)}
	}
	e.persistMu.Lock()
	err := m.store.Delete(rec.ID)
	e.persistMu.Unlock()
	if err != nil {
		return fmt.Errorf("deleting sandbox %s from the store: %w", rec.ID, err)
	}
	if rec.ManagedWorkspace {
		m.dropManagedWorkspaceRecord(rec) // workspaces.go
	}
	m.emit(Event{Type: EventDeleted, SandboxID: rec.ID, Profile: rec.Profile, Owner: rec.Owner, Warm: rec.Warm, Reason: reason})
	return nil
}

// removed ends e's destroy: what of it is left (a failed engine call) is the orphan sweep's from now on.
func (m *Manager) removed(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.removing[e.rec.ID] == e {
		delete(m.removing, e.rec.ID)
	}
}

// freed gives e's place under max_sandboxes back: to the create waiting for it, or to anyone.
func (m *Manager) freed(e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.done == nil || e.freedDone {
		return
	}
	e.freedDone = true
	for i, f := range m.freeing {
		if f == e {
			m.freeing = append(m.freeing[:i], m.freeing[i+1:]...)
			break
		}
	}
	close(e.done)
	kick(m.warmKick)
}
