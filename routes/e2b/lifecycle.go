package e2b

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

const envdVersion = agentapi.E2BEnvdVersion

// sandbox finds an E2B sandbox the caller may see: missing, another owner's, expired or made by another dialect
// all answer the same 404 with "code":404 (what the SDK reads as SandboxNotFoundError, or kill's false).
func (h *Handler) sandbox(ctx context.Context, p service.Principal, id string) (sandboxes.Sandbox, state, *Error) {
	sb, err := h.svc.Visible(ctx, p, id)
	if err != nil {
		if e := toError(err); e.Status != http.StatusNotFound {
			return sb, state{}, e
		}
		return sb, state{}, notFound(id)
	}
	st, ok := stateOf(sb)
	if !ok || sb.Status == sandboxes.StatusExpired {
		return sandboxes.Sandbox{}, state{}, notFound(id)
	}
	return sb, st, nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, p service.Principal) {
	sb, st, e := h.sandbox(r.Context(), p, r.PathValue("id"))
	if e != nil {
		writeError(w, e)
		return
	}
	envd, err := h.svc.SandboxAccessKey(sb.ID, purposeEnvd)
	if err != nil {
		writeError(w, toError(err))
		return
	}
	d := SandboxDetail{ListedSandbox: h.present(sb, st), EnvdAccessToken: envd, Domain: h.domain(),
		Lifecycle: Lifecycle{OnTimeout: "kill", AutoResume: st.AutoResume}}
	if sb.OnExpire != "" {
		d.Lifecycle.OnTimeout = "pause"
	}
	internet := !st.NoInternet
	d.AllowInternetAccess = &internet
	public := !st.Private
	d.Network = &NetworkConfig{AllowPublicTraffic: &public}
	writeJSON(w, http.StatusOK, d)
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if _, _, e := h.sandbox(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	if err := h.svc.DeleteSandbox(r.Context(), p, id); err != nil {
		writeError(w, toError(err))
		return
	}
	h.cfg.Logger.Info("e2b kill", "sandbox", id, "owner", p.Owner)
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout makes the sandbox expire timeout seconds from now, sooner or later than before (E2B's rule).
func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	var body struct {
		Timeout *int64 `json:"timeout"`
	}
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	if body.Timeout == nil {
		writeError(w, errorf(http.StatusBadRequest, "timeout is required"))
		return
	}
	ttl, e := h.ttlOf(body.Timeout, 0)
	if e != nil {
		writeError(w, e)
		return
	}
	if _, _, e := h.sandbox(r.Context(), p, id); e != nil {
		writeError(w, e)
		return
	}
	if _, err := h.svc.SetTTL(r.Context(), p, id, ttl); err != nil {
		writeError(w, toError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refresh extends the sandbox's life to at least duration seconds from now (default 60); it never shortens it.
func (h *Handler) refresh(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	var body struct {
		Duration *int64 `json:"duration"`
	}
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	d, e := h.ttlOf(body.Duration, 60*time.Second)
	if e != nil {
		writeError(w, e)
		return
	}
	sb, _, e := h.sandbox(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	if e := h.extendTo(r.Context(), p, sb, d); e != nil {
		writeError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// extendTo makes sb live at least d from now.
func (h *Handler) extendTo(ctx context.Context, p service.Principal, sb sandboxes.Sandbox, d time.Duration) *Error {
	if sb.ExpiresAt != nil && !sb.ExpiresAt.Before(h.cfg.Now().Add(d)) {
		return nil
	}
	if _, err := h.svc.SetTTL(ctx, p, sb.ID, d); err != nil {
		return toError(err)
	}
	return nil
}

// pause freezes the sandbox with its processes (the cgroup freezer): 204, or 409 when it is already paused. One
// whose compute was stopped by the idle collector is started first, so that what it held comes back as E2B
// promises after a resume.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	if err := h.svc.CanPause(); err != nil {
		writeError(w, toError(err))
		return
	}
	var body struct {
		Memory *bool `json:"memory"`
	}
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	sb, _, e := h.sandbox(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	if pausedE2B(sb) {
		writeError(w, errorf(http.StatusConflict, "sandbox %q is already paused", id))
		return
	}
	if _, err := h.svc.Running(r.Context(), p, id, ""); err != nil {
		writeError(w, toError(err))
		return
	}
	if _, err := h.svc.Pause(r.Context(), p, id); err != nil {
		writeError(w, toError(err))
		return
	}
	h.cfg.Logger.Info("e2b pause", "sandbox", id, "owner", p.Owner)
	w.WriteHeader(http.StatusNoContent)
}

// connect resumes a paused sandbox (201) or finds a running one (200), and extends its life to at least timeout
// seconds from now (default 300): E2B's connect only ever extends.
func (h *Handler) connect(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	var body struct {
		Timeout *int64 `json:"timeout"`
		Memory  *bool  `json:"memory"`
	}
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	d, e := h.ttlOf(body.Timeout, DefaultTimeout)
	if e != nil {
		writeError(w, e)
		return
	}
	sb, st, e := h.sandbox(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	status := http.StatusOK
	if pausedE2B(sb) {
		// Frozen (asked, idle or at its timeout) or stopped at its timeout: resumed or started, and given its TTL
		// again (sandboxes/expiry.go).
		resumed, err := h.svc.Resume(r.Context(), p, id)
		if err != nil {
			writeError(w, toError(err))
			return
		}
		sb, status = resumed, http.StatusCreated
	}
	if e := h.extendTo(r.Context(), p, sb, d); e != nil {
		writeError(w, e)
		return
	}
	out, e := h.answer(sb, st)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, status, out)
}

// metrics answers the sandbox's current resource use as one sample (sandgate keeps no history of it): start and
// end are accepted and the sample is answered when it falls between them.
func (h *Handler) metrics(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	sb, _, e := h.sandbox(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	q := r.URL.Query()
	now := h.cfg.Now()
	for _, k := range []string{"start", "end"} {
		if v := q.Get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				writeError(w, errorf(http.StatusBadRequest, "%s must be unix seconds", k))
				return
			}
			if (k == "start" && n > now.Unix()) || (k == "end" && n < now.Unix()) {
				writeJSON(w, http.StatusOK, []SandboxMetric{})
				return
			}
		}
	}
	m, ok, err := h.sample(r.Context(), p, sb, now)
	if err != nil {
		writeError(w, toError(err))
		return
	}
	out := []SandboxMetric{}
	if ok {
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxMetricsIDs bounds GET /sandboxes/metrics?sandbox_ids=.
const maxMetricsIDs = 100

// metricsMany answers the current sample of several sandboxes of the caller's: {"sandboxes": {id: metric}}.
func (h *Handler) metricsMany(w http.ResponseWriter, r *http.Request, p service.Principal) {
	ids := strings.Split(r.URL.Query().Get("sandbox_ids"), ",")
	if len(ids) > maxMetricsIDs {
		writeError(w, errorf(http.StatusBadRequest, "at most %d sandbox_ids", maxMetricsIDs))
		return
	}
	out := map[string]SandboxMetric{}
	now := h.cfg.Now()
	for _, id := range ids {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		sb, _, e := h.sandbox(r.Context(), p, id)
		if e != nil {
			continue
		}
		if m, ok, err := h.sample(r.Context(), p, sb, now); err == nil && ok {
			out[id] = m
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

func (h *Handler) sample(ctx context.Context, p service.Principal, sb sandboxes.Sandbox, now time.Time) (SandboxMetric, bool, error) {
	u, ok, err := h.svc.UsageOf(ctx, p, sb.ID)
	if err != nil || !ok {
		return SandboxMetric{}, false, err
	}
	ls := h.present(sb, state{})
	m := SandboxMetric{Timestamp: rfc3339(now), TimestampUnix: now.Unix(), CPUCount: ls.CPUCount,
		MemUsed: u.MemoryBytes, MemTotal: u.MemoryLimit, DiskTotal: uint64(max(ls.DiskSizeMB, 0)) << 20}
	if u.CPUPercent != nil {
		m.CPUUsedPct = *u.CPUPercent / float64(max(ls.CPUCount, 1))
	}
	return m, true, nil
}
