package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

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
		m.noteExitAtStart(e, err)
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

// noteExitAtStart records the death of a container that exited before Start returned. On a busy engine the launch
// sees it first; the die event's handler then finds the death recorded (and the container gone if it were not).
// Recording it here keeps the dead container and its log for recovery (removeFailedContainer), and the EventDied
// with its exit code, whichever comes first. A warm member's death is left to the event handler, which destroys it.
func (m *Manager) noteExitAtStart(e *entry, err error) {
	var exited *ExitedError
	if !errors.As(err, &exited) {
		return
	}
	m.mu.RLock()
	warm, cid, lastOOM := e.rec.Warm, e.rec.ContainerID, e.lastOOM
	m.mu.RUnlock()
	if warm || cid == "" {
		return
	}
	m.recordDeath(e, cid, classifyDeath(exited.ExitCode, exited.OOMKilled, lastOOM, exited.At))
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
func (m *Manager) bringUp(ctx context.Context, e *entry, timeout time.Duration, release func()) (addr string, err error) {
	tr := newLaunchTrace()
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
	defer func() { m.logLaunchTrace(tr, rec.ID, err) }()
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
		tr.step("network")
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
		tr.step("volume")
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		sctx, cancel = step()
		id, err := m.driver.Create(sctx, spec)
		cancel()
		if err != nil {
			return "", fmt.Errorf("creating container: %w", err)
		}
		tr.step("create")
		m.mu.Lock()
		e.rec.ContainerID = id
		e.rec.AwaitsClaim = spec.Env[agentapi.EnvAwaitClaim] == "1"
		if e.rec.Phase == PhaseCreating {
			e.rec.Phase = PhaseStarting
		}
		m.mu.Unlock()
		m.persist(e)
		rec.ContainerID = id
		tr.step("store")
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	sctx, cancel := step()
	defer cancel()
	addr, err = m.driver.Start(sctx, rec.ContainerID, spec)
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
		e.rec.AwaitsClaim = spec.Env[agentapi.EnvAwaitClaim] == "1"
		rec.AwaitsClaim = e.rec.AwaitsClaim
		m.mu.Unlock()
		m.persist(e)
		addr, err = m.driver.Start(sctx, id, spec)
	}
	if err != nil {
		return "", fmt.Errorf("starting container: %w", err)
	}
	tr.step("start")
	m.mu.Lock()
	m.setAddrLocked(e, addr)
	m.mu.Unlock()
	release()
	released = true
	if err := m.waitHealthy(ctx, addr, timeout); err != nil {
		return "", err
	}
	tr.step("health")
	m.mu.RLock()
	rec, p = e.rec, e.profile
	m.mu.RUnlock()
	if rec.AwaitsClaim && !rec.Warm {
		// A container made for a warm pool by image, claimed since: its agent waits again at every start for the
		// create's environment (warm_image.go).
		if err := m.deliverClaim(ctx, rec, p, addr, timeout); err != nil {
			return "", err
		}
		tr.step("claim")
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
		e.launchErr = nil
		errors.As(err, &e.launchErr)
		e.rec.IdleExpiresAt = nil
		ev = Event{Type: EventFailed, SandboxID: e.rec.ID, Profile: e.rec.Profile, Owner: e.rec.Owner, Warm: e.rec.Warm, Reason: err.Error()}
	default:
		e.rec.Phase = PhaseRunning
		m.setAddrLocked(e, addr)
		if !recovered {
			// A rebuilt sandbox keeps its death's reason in last_error.
			e.rec.LastError = ""
		}
		if !e.rec.Warm && !(e.adopting && e.rec.IdleExpiresAt != nil) {
			setIdleDeadline(e, m.clock())
		}
		if !e.adopting {
			// Started again after its TTL stopped it: it lives its TTL again. An adopted one that its record says
			// was kept is frozen or stopped again by the collector (expiry.go, keepDue).
			m.wakeLocked(e, m.clock())
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
	warmImage := e.rec.Warm && e.rec.ImageWarm
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
	if err == nil && warmImage {
		kick(m.warmKick) // a pool by image fills one member at a time per start slot: the next one now
	}
}

// waitHealthy waits for the agent at addr to answer /health. The agent binds its port before its own set-up
// and serves only once ready, so a connection that is accepted is the readiness signal: the request waits in the
// agent's accept queue and is answered the moment it serves. Only the short time before the agent's process has
// bound its port (a refused connection, or no socket file yet) is polled, every refusedRetry for refusedWindow; other answers (a
// 503 while the agent's start-up customisation runs, an error) are retried with a growing delay.
func (m *Manager) waitHealthy(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(agentapi.PinAgent(withInternalCall(ctx), addr), timeout)
	defer cancel()
	base, hc := agentapi.BaseURL(addr, m.http)
	url := base + "/health"
	delay := 10 * time.Millisecond
	began := time.Now()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		wait := delay
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
			if notListening(err) && time.Since(began) < refusedWindow {
				wait = refusedRetry
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &Error{Code: CodeTimeout, Message: fmt.Sprintf("the agent did not answer /health within %s", timeout), Err: last}
			}
			return ctx.Err()
		case <-time.After(wait):
		}
		if wait == delay && delay < 100*time.Millisecond {
			delay += 10 * time.Millisecond
		}
	}
}

// refusedRetry is how soon a readiness probe that found nothing listening tries again. A refused connection
// costs the agent nothing (the kernel answers it), and the agent binds within milliseconds of its start.
// Past refusedWindow (an agent slow to start, or one built before it bound early) the delay grows as for any
// other failure.
const (
	refusedRetry  = 2 * time.Millisecond
	refusedWindow = time.Second
)

// notListening reports an error that means the agent's process has not bound its port or socket yet.
func notListening(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
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
	p.shipEnv(env) // HOME, USER, the env file (profile_ship.go)
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
	env[agentapi.EnvSandboxID] = rec.ID
	env[agentapi.EnvCapabilities] = strings.Join(p.Capabilities, ",")
	if rec.Warm && rec.ImageWarm && p.InjectsAgent() {
		env[agentapi.EnvAwaitClaim] = "1" // its create's environment comes with the claim (warm_image.go)
	}
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
	spec := ContainerSpec{
		Name: m.ContainerName(rec.ID), Image: p.Image, Env: env, Labels: labels, Volume: m.VolumeName(rec.WorkspaceID),
		Profile: p, Network: m.networkFor(p), AgentPort: m.mcfg.AgentPort, HostBinds: p.Binds, AgentSocketDir: socketDir,
		ResolvConf:  m.resolvConfFor(p),
		IdentityDir: m.identityDir(p),
		AgentImage:  agentImage, AgentVolumePrefix: m.mcfg.Namespace + "-agent-",
		AgentVolumeLabels: map[string]string{m.label(labelManaged): "true", m.label(labelAgentVolume): "true"},
	}
	if agentImage != "" {
		spec.HomeSeedLabels = map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance(),
			m.label(labelHomeSeed): "true", m.label(labelID): rec.ID}
	}
	if p.NetworkSpares > 0 {
		spec.HolderLabels = map[string]string{m.label(labelManaged): "true", m.label(labelInstance): m.Instance(),
			m.label(labelHolder): spec.Network}
	}
	return spec
}
