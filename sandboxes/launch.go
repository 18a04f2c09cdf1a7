package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Label keys, under the namespace: "<ns>.id" and so on.
const (
	labelManaged    = "managed"
	labelID         = "id"
	labelProfile    = "profile"
	labelOwner      = "owner"
	labelCreated    = "created"
	labelInstance   = "instance"
	labelGeneration = "generation"
	labelWorkspace  = "workspace"

	labelManagedWorkspace = "managed_workspace"
	// labelAgentVolume marks the read-only volumes that carry the agent into other images (profile_image.go).
	labelAgentVolume = "agent"
)

func (m *Manager) label(key string) string { return m.mcfg.Namespace + "." + key }

// VolumeName is the Docker volume of a workspace id.
func (m *Manager) VolumeName(workspaceID string) string { return m.mcfg.Namespace + "-" + workspaceID }

// ContainerName is the Docker container name of a sandbox id.
func (m *Manager) ContainerName(id string) string { return m.mcfg.Namespace + "-" + id }

// InternalNetwork is the name of the namespace's internal (no egress) network.
func (m *Manager) InternalNetwork() string { return m.mcfg.Namespace + "-internal" }

// BridgeNetwork is the name of the namespace's network with egress, which profiles with network bridge join
// instead of Docker's default bridge: the gateway owns it, so it can enforce the address policy on it without
// touching other containers of the host.
func (m *Manager) BridgeNetwork() string { return m.mcfg.Namespace + "-bridge" }

func (m *Manager) networkFor(p Profile) string {
	switch p.Network {
	case "", NetworkInternal:
		return m.InternalNetwork()
	case NetworkBridge:
		return m.BridgeNetwork()
	default:
		return p.Network
	}
}

// beginLaunchLocked starts the background bring-up of e: create what is missing, start, wait for /health.
func (m *Manager) beginLaunchLocked(e *entry) {
	ctx, cancel := context.WithCancel(m.ctx)
	e.launching = true
	e.cancelLaunch = cancel
	e.ready = make(chan struct{})
	e.startBegan = time.Now()
	// A launch that makes a new container measures the cold start and the engine's throughput (warm.go).
	e.freshLaunch = e.rec.ContainerID == ""
	m.launching++
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		m.launch(ctx, e)
	}()
}

func (m *Manager) launch(ctx context.Context, e *entry) {
	m.mu.RLock()
	timeout := m.cfg.StartTimeout
	after := e.after
	class := startUser
	if e.rec.Warm {
		class = startRefill
	}
	m.mu.RUnlock()
	// The wait for a start slot (and for the sandbox this one replaces under max_sandboxes) is bounded by the start
	// timeout: a create in a burst larger than the engine can take ends with a typed timeout, never a hang.
	qctx, qcancel := context.WithTimeout(ctx, timeout)
	defer qcancel()
	if after != nil {
		select {
		case <-after:
		case <-qctx.Done():
			m.finishLaunch(e, "", queueErr(ctx, timeout, "for the sandbox it replaces under max_sandboxes to be removed"))
			return
		}
	}
	release, err := m.starts.acquire(qctx, class)
	if err != nil {
		m.finishLaunch(e, "", queueErr(ctx, timeout, "for a start slot"))
		return
	}
	// The engine's throughput is measured from here: how many launches work on the engine beside this one, and
	// how long this one takes, queueing excluded (warm.go).
	m.mu.Lock()
	m.active++
	e.active = true
	e.launchLevel = m.active
	e.activeAt = time.Now()
	m.mu.Unlock()
	e.opMu.Lock()
	addr, err := m.bringUp(ctx, e, timeout, release)
	if err != nil {
		m.removeFailedContainer(e, err)
	}
	e.opMu.Unlock()
	m.finishLaunch(e, addr, err)
}

// deactivateLocked ends e's count among the launches working on the engine.
func (m *Manager) deactivateLocked(e *entry) {
	if e.active {
		e.active = false
		m.active--
	}
}

// queueErr is why a launch that waited in line ended: its own cancellation, or the start timeout (typed).
func queueErr(ctx context.Context, timeout time.Duration, what string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &Error{Code: CodeTimeout, Message: fmt.Sprintf("waited %s %s", timeout, what)}
}

// removeFailedContainer removes the container of a launch that failed (its workspace stays for a retry). It runs
// before finishLaunch publishes the failure: until then the launch is still under way, so the next EnsureRunning
// waits for it instead of creating a container under the name the failed one still holds. A launch cancelled by a
// stop or delete leaves its container to them, and a closing Manager leaves it for the next start to adopt.
func (m *Manager) removeFailedContainer(e *entry, err error) {
	if m.ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	cid := e.rec.ContainerID
	if e.rec.Died != nil && !e.deleted && cid != "" {
		// It died while starting (an injected image's entrypoint that exits at once, an agent that crashed): the
		// dead container keeps its log, the evidence of why, and its next use starts it again (recovery.go).
		m.mu.Unlock()
		m.log.Warn("sandbox died while starting", "sandbox", e.rec.ID, "reason", e.rec.Died.Reason, "error", err)
		return
	}
	if e.deleted || e.stopRequested || cid == "" {
		beforeContainer := cid == "" && !e.deleted
		m.mu.Unlock()
		if beforeContainer {
			// Failed before the engine made a container (network, packet filter, socket directory, volume).
			m.log.Warn("sandbox failed to start", "sandbox", e.rec.ID, "error", err)
		}
		return
	}
	e.expectStop = true
	e.rec.ContainerID = ""
	m.mu.Unlock()
	m.log.Warn("sandbox failed to start", "sandbox", e.rec.ID, "error", err)
	rmCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if rerr := m.driver.Remove(rmCtx, cid); rerr != nil {
		m.log.Warn("removing a failed container", "container", cid, "error", rerr)
	}
	cancel()
	m.mu.Lock()
	e.expectStop = false
	m.mu.Unlock()
}

// bringUp does the engine work of a launch. release frees the start slot once the container runs (waiting for
// the agent needs no slot).
func (m *Manager) bringUp(ctx context.Context, e *entry, timeout time.Duration, release func()) (string, error) {
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	m.mu.RLock()
	rec := e.rec
	p := e.profile
	deleted := e.deleted
	m.mu.RUnlock()
	if deleted {
		return "", errors.New("deleted")
	}
	spec := m.specFor(rec, p)
	// Engine steps run to completion even when the launch is cancelled (a delete or stop arrived): a create the
	// engine performed must be recorded, so whoever cancelled can remove it. Cancellation is checked between steps.
	step := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	}
	if p.Network == "" || p.Network == NetworkInternal || p.Network == NetworkBridge {
		sctx, cancel := step()
		err := m.ensureNetwork(sctx, spec.Network, p.Network != NetworkBridge)
		cancel()
		if err != nil {
			return "", err
		}
	}
	if spec.AgentSocketDir != "" {
		// Made on every launch: a host reboot empties /run while the stopped container waits.
		if _, err := m.prepareSocketDir(rec.ID); err != nil {
			return "", err
		}
	}
	if rec.ContainerID == "" {
		sctx, cancel := step()
		err := m.driver.CreateVolume(sctx, spec.Volume, m.volumeLabels(rec))
		cancel()
		if err != nil {
			return "", fmt.Errorf("creating workspace volume: %w", err)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		sctx, cancel = step()
		id, err := m.driver.Create(sctx, spec)
		cancel()
		if err != nil {
			return "", fmt.Errorf("creating container: %w", err)
		}
		m.mu.Lock()
		e.rec.ContainerID = id
		if e.rec.Phase == PhaseCreating {
			e.rec.Phase = PhaseStarting
		}
		m.mu.Unlock()
		m.persist(e)
		rec.ContainerID = id
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	sctx, cancel := step()
	defer cancel()
	addr, err := m.driver.Start(sctx, rec.ContainerID, spec)
	if errors.Is(err, ErrContainerNotFound) {
		// The container went away while stopped (someone removed it): shape a new one on the same workspace.
		m.mu.Lock()
		e.rec.Generation++
		rec.Generation = e.rec.Generation
		m.mu.Unlock()
		spec = m.specFor(rec, p)
		id, cerr := m.driver.Create(sctx, spec)
		if cerr != nil {
			return "", fmt.Errorf("recreating container: %w", cerr)
		}
		m.mu.Lock()
		e.rec.ContainerID = id
		m.mu.Unlock()
		m.persist(e)
		addr, err = m.driver.Start(sctx, id, spec)
	}
	if err != nil {
		return "", fmt.Errorf("starting container: %w", err)
	}
	m.mu.Lock()
	e.rec.Addr = addr
	m.mu.Unlock()
	release()
	released = true
	if err := m.waitHealthy(ctx, addr, timeout); err != nil {
		return "", err
	}
	return addr, nil
}

// finishLaunch records the outcome of a launch and wakes its waiters.
func (m *Manager) finishLaunch(e *entry, addr string, err error) {
	if err != nil && m.ctx.Err() != nil {
		// The Manager is closing: leave the sandbox as it is; the next start reconciles and adopts it.
		m.mu.Lock()
		e.launching = false
		m.launching--
		m.deactivateLocked(e)
		e.cancelLaunch = nil
		ch := e.ready
		m.mu.Unlock()
		if ch != nil {
			close(ch)
		}
		return
	}
	now := time.Now()
	m.mu.Lock()
	e.launching = false
	m.launching--
	m.deactivateLocked(e)
	e.cancelLaunch = nil
	var backoff time.Duration
	if !e.deleted && !e.stopRequested && !e.adopting && !e.recovering {
		backoff = m.noteLaunchLocked(e, now.Sub(e.startBegan), err, m.clock()) // warm.go
	}
	recovered := e.recovering
	e.recovering = false
	ch := e.ready
	deleted := e.deleted
	var ev Event
	// A stop that cancelled this launch owns the outcome: it stops the container (even one that just became
	// ready) and records the phase.
	stopping := e.stopRequested
	e.stopRequested = false
	switch {
	case deleted:
	case stopping:
		// Stop cancelled this launch; it stops the container next and records the phase.
		e.rec.Phase = PhaseStopped
	case e.rec.Died != nil:
		// The event watcher already recorded the death.
	case err != nil:
		e.rec.Phase = PhaseFailed
		e.rec.LastError = err.Error()
		e.rec.IdleExpiresAt = nil
		ev = Event{Type: EventFailed, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Warm: e.rec.Warm, Reason: err.Error()}
	default:
		e.rec.Phase = PhaseRunning
		e.rec.Addr = addr
		if !recovered {
			// A rebuilt sandbox keeps its death's reason in last_error.
			e.rec.LastError = ""
		}
		if !e.rec.Warm && !(e.adopting && e.rec.IdleExpiresAt != nil) {
			setIdleDeadline(e, now)
		}
		e.adopting = false
		if e.rec.Warm {
			m.warm[e.rec.ProfileHash] = append(m.warm[e.rec.ProfileHash], e.rec.ID)
		}
		ev = Event{Type: EventReady, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Warm: e.rec.Warm,
			LaunchType: e.rec.LaunchType, Duration: now.Sub(e.startBegan)}
		if recovered {
			ev.Reason = "recovered"
		}
	}
	warmFailed := err != nil && e.rec.Warm && !deleted
	if warmFailed {
		m.detachLocked(e)
	}
	m.mu.Unlock()
	// Waiters wake only once the outcome is final (removeFailedContainer already removed a failed container, so a
	// retry never meets it).
	defer func() {
		if ch != nil {
			close(ch)
		}
	}()
	if deleted || stopping {
		return
	}
	if warmFailed {
		m.log.Warn("warm sandbox failed to start; the pool backs off", "sandbox", e.rec.ID, "profile", e.rec.Profile, "error", err, "backoff", backoff)
		m.destroyDetached(e, "warm start failed")
		m.emit(ev)
		if backoff > 0 {
			m.emit(Event{Type: EventWarmBackoff, Profile: e.rec.Profile, Warm: true, Reason: err.Error(), Duration: backoff})
		}
		kick(m.warmKick)
		return
	}
	m.persist(e)
	if ev.Type != "" {
		m.emit(ev)
	}
}

func (m *Manager) waitHealthy(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base, hc := agentapi.BaseURL(addr, m.http)
	url := base + "/health"
	delay := 10 * time.Millisecond
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				drainClose(resp) // keeps the connection for the first request (warm.go)
				return nil
			}
			// An agent whose start-up (dependencies, init commands) failed says so; waiting longer cannot help.
			failed := agentStartupFailure(resp)
			resp.Body.Close()
			if failed != nil {
				return failed
			}
			last = fmt.Errorf("GET /health answered %s", resp.Status)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &Error{Code: CodeTimeout, Message: fmt.Sprintf("the agent did not answer /health within %s", timeout), Err: last}
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		if delay < 100*time.Millisecond {
			delay += 10 * time.Millisecond
		}
	}
}

func (m *Manager) ensureNetwork(ctx context.Context, name string, internal bool) error {
	// Docker allows two networks of one name; concurrent first creates must not make both.
	m.netMu.Lock()
	defer m.netMu.Unlock()
	m.mu.RLock()
	ok := m.networks[name]
	m.mu.RUnlock()
	if ok {
		return nil
	}
	if err := m.driver.EnsureNetwork(ctx, name, internal, map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance()}); err != nil {
		return fmt.Errorf("creating network %s: %w", name, err)
	}
	m.mu.Lock()
	m.networks[name] = true
	m.mu.Unlock()
	return nil
}

func (m *Manager) volumeLabels(rec Record) map[string]string {
	return map[string]string{
		m.label(labelManaged): "true", m.label(labelInstance): m.Instance(), m.label(labelWorkspace): rec.WorkspaceID,
		// Only workspaces the Manager made are swept as orphans; one a caller named is theirs to keep.
		m.label(labelManagedWorkspace): fmt.Sprint(rec.ManagedWorkspace),
	}
}

func (m *Manager) specFor(rec Record, p Profile) ContainerSpec {
	env := make(map[string]string, len(p.Env)+len(rec.Env)+3)
	for k, v := range p.Env {
		env[k] = v
	}
	for k, v := range rec.Env {
		env[k] = v
	}
	for k, v := range p.CustomiseEnv(rec.Env) { // init, services, dependencies, mirrors, proxy (profile_customise.go)
		env[k] = v
	}
	var socketDir string
	if p.Network == NetworkNone {
		socketDir = m.SocketDir(rec.ID)
		env[agentapi.EnvSocket] = SocketMountPoint + "/" + AgentSocketName
	}
	// Only the digest goes in: the container's environment is readable by the sandbox's own code (/proc/1/environ),
	// and a digest authenticates nothing. A variable of the same name from the profile or the caller is replaced.
	delete(env, agentapi.EnvToken)
	delete(env, agentapi.EnvTokenFile)
	env[agentapi.EnvTokenDigest] = agentapi.TokenDigest(rec.Token)
	env["SANDGATE_SANDBOX_ID"] = rec.ID
	env["SANDGATE_CAPABILITIES"] = strings.Join(p.Capabilities, ",")
	var agentImage string
	if p.InjectsAgent() {
		m.mu.RLock()
		agentImage = m.cfg.AgentImage
		m.mu.RUnlock()
		// Another image's HOME belongs to its own user (often /root); the sandbox user's writable home is our
		// tmpfs. A profile or caller that names HOME keeps theirs.
		if _, ok := env["HOME"]; !ok {
			env["HOME"] = SandboxHome
		}
	}
	labels := map[string]string{
		m.label(labelManaged):    "true",
		m.label(labelID):         rec.ID,
		m.label(labelProfile):    rec.Profile,
		m.label(labelOwner):      rec.Owner,
		m.label(labelCreated):    rec.CreatedAt.UTC().Format(time.RFC3339),
		m.label(labelInstance):   m.Instance(),
		m.label(labelGeneration): fmt.Sprint(rec.Generation),
		m.label(labelWorkspace):  rec.WorkspaceID,
	}
	return ContainerSpec{
		Name: m.ContainerName(rec.ID), Image: p.Image, Env: env, Labels: labels, Volume: m.VolumeName(rec.WorkspaceID),
		Profile: p, Network: m.networkFor(p), AgentPort: m.mcfg.AgentPort, HostBinds: p.Binds, AgentSocketDir: socketDir,
		AgentImage: agentImage, AgentVolumePrefix: m.mcfg.Namespace + "-agent-",
		AgentVolumeLabels: map[string]string{m.label(labelManaged): "true", m.label(labelAgentVolume): "true"},
	}
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
		e.rec.Addr = ""
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
	return m.destroy(ctx, e, reason)
}

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
	delete(m.entries, e.rec.ID)
	if ids := m.warm[e.rec.ProfileHash]; len(ids) > 0 {
		m.warm[e.rec.ProfileHash] = slicesDelete(ids, e.rec.ID)
	}
}

func slicesDelete(ids []string, id string) []string {
	out := ids[:0]
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
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
	m.emit(Event{Type: EventDeleted, SandboxID: rec.ID, Profile: rec.Profile, Owner: rec.Owner, Warm: rec.Warm, Reason: reason})
	return nil
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

// persist writes e's record; writes of one sandbox never reorder.
func (m *Manager) persist(e *entry) {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	m.mu.Lock()
	if e.deleted {
		m.mu.Unlock()
		return
	}
	rec := e.rec
	e.lastPersist = time.Now()
	m.mu.Unlock()
	if err := m.store.Put(rec); err != nil {
		m.log.Error("writing the sandbox store", "sandbox", rec.ID, "error", err)
	}
}

func (m *Manager) flushAll() {
	m.mu.RLock()
	all := make([]*entry, 0, len(m.entries))
	for _, e := range m.entries {
		all = append(all, e)
	}
	m.mu.RUnlock()
	for _, e := range all {
		m.persist(e)
	}
}

// claimLocked pops the oldest ready warm member of p's current shape, or returns nil.
func (m *Manager) claimLocked(p Profile, now time.Time) *entry {
	hash := p.Hash()
	for len(m.warm[hash]) > 0 {
		id := m.warm[hash][0]
		m.warm[hash] = m.warm[hash][1:]
		e := m.entries[id]
		if e == nil || e.deleted || !e.rec.Warm || e.rec.Phase != PhaseRunning || e.rec.Died != nil || e.rec.ProfileHash != hash {
			continue
		}
		if now.Sub(e.rec.CreatedAt) > m.cfg.WarmMaxAge {
			m.detachLocked(e)
			go m.destroyDetached(e, "warm member too old")
			continue
		}
		e.profile = p // same hash: only lifecycle settings (idle timeout) can differ
		spec := p
		e.rec.Spec = &spec
		return e
	}
	return nil
}

// warmVictimLocked picks the oldest warm member to make room for a real create, or nil.
func (m *Manager) warmVictimLocked() *entry {
	var victim *entry
	for _, e := range m.entries {
		if e.rec.Warm && !e.deleted && (victim == nil || e.rec.CreatedAt.Before(victim.rec.CreatedAt)) {
			victim = e
		}
	}
	return victim
}
