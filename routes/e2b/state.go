package e2b

import (
	"encoding/json"
	"maps"
	"math"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// What the dialect keeps with a sandbox, as metadata under a reserved prefix (a tenant can neither set, filter on
// nor see these keys through this dialect): the template it was created from (which also marks a sandbox as made
// here: the edge serves only those), whether its ports need the traffic token, whether internet access was cut,
// and each sandbox-wide env var under its own key.
const (
	reservedPrefix = "sandgate.e2b/"
	keyTemplate    = reservedPrefix + "template"
	keyPrivate     = reservedPrefix + "private"
	keyNoInternet  = reservedPrefix + "no-internet"
	keyAutoResume  = reservedPrefix + "auto-resume"
	envPrefix      = reservedPrefix + "env/"
)

// Purposes of the keys derived per sandbox (service.AccessKey): the envd access token and the traffic token.
const (
	purposeEnvd    = "e2b-envd-access"
	purposeTraffic = "e2b-traffic-access"
)

// clientID is what E2B's deprecated, still required clientID answers.
const clientID = "sandgate"

// state is what the dialect reads back of a sandbox's metadata.
type state struct {
	Template   string
	Private    bool
	NoInternet bool
	// AutoResume: traffic to the sandbox resumes it when E2B's pause or its timeout paused it (autoResume
	// enabled); otherwise only connect does, as on E2B.
	AutoResume bool
	Env        map[string]string
	Tenant     map[string]string
}

// stateOf splits a sandbox's metadata; ok is false for a sandbox this dialect did not create.
func stateOf(sb sandboxes.Sandbox) (state, bool) {
	st := state{Env: map[string]string{}, Tenant: map[string]string{}}
	for k, v := range sb.Metadata {
		switch {
		case k == keyTemplate:
			st.Template = v
		case k == keyPrivate:
			st.Private = v == "1"
		case k == keyNoInternet:
			st.NoInternet = v == "1"
		case k == keyAutoResume:
			st.AutoResume = v == "1"
		case strings.HasPrefix(k, envPrefix):
			st.Env[strings.TrimPrefix(k, envPrefix)] = v
		case strings.HasPrefix(k, reservedPrefix):
		default:
			st.Tenant[k] = v
		}
	}
	return st, st.Template != ""
}

// envHeader is the sandbox-wide environment as the agent reads it (agentapi.E2BEnvHeader): a JSON object.
func (st state) envHeader() string {
	b, _ := json.Marshal(st.Env) // a string map always marshals
	return string(b)
}

// e2bState reads an E2B sandbox's state from its metadata (the caller checked it is one).
func e2bMetadata(st state) map[string]string {
	md := maps.Clone(st.Tenant)
	md[keyTemplate] = st.Template
	if st.Private {
		md[keyPrivate] = "1"
	}
	if st.NoInternet {
		md[keyNoInternet] = "1"
	}
	if st.AutoResume {
		md[keyAutoResume] = "1"
	}
	for k, v := range st.Env {
		md[envPrefix+k] = v
	}
	return md
}

// farFuture is endAt for a sandbox without a TTL (E2B's endAt is required).
const farFuture = "9999-12-31T23:59:59Z"

// present is a sandbox as E2B lists it.
func (h *Handler) present(sb sandboxes.Sandbox, st state) ListedSandbox {
	out := ListedSandbox{
		SandboxID: sb.ID, TemplateID: st.Template, Alias: st.Template, ClientID: clientID,
		StartedAt: rfc3339(sb.CreatedAt), EndAt: farFuture, State: "running",
		EnvdVersion: agentapi.E2BEnvdVersion, Metadata: st.Tenant, VolumeMounts: []VolumeMount{},
	}
	if sb.ExpiresAt != nil {
		out.EndAt = rfc3339(*sb.ExpiresAt)
	}
	if pausedE2B(sb) {
		out.State = "paused"
	}
	for _, p := range h.svc.Profiles() {
		if p.ID != sb.Profile {
			continue
		}
		out.CPUCount = max(1, int(math.Ceil(p.Resources.CPUs)))
		if n, err := sandboxes.ParseBytes(p.Resources.Memory); err == nil {
			out.MemoryMB = n >> 20
		}
		if n := p.Resources.WorkspaceBytes(); n > 0 {
			out.DiskSizeMB = n >> 20
		}
	}
	return out
}

func (h *Handler) domain() *string {
	if h.cfg.Domain == "" {
		return nil
	}
	d := h.cfg.Domain
	return &d
}

// pausedE2B: the sandbox is paused as E2B sees it: frozen, or kept past its timeout (autoPause: frozen, or stopped
// for autoPauseMemory false).
func pausedE2B(sb sandboxes.Sandbox) bool {
	return sb.Status == sandboxes.StatusPaused || sb.ExpiredAt != nil
}

// pausedByTenant: E2B's pause, or its timeout, paused it; traffic resumes it only with autoResume. A sandbox
// paused by its profile's idle_action pause is sandgate's own reclaim, invisible to the tenant: traffic always
// resumes it (an idle pause has a second deadline, IdleExpiresAt; an asked one has none).
func pausedByTenant(sb sandboxes.Sandbox) bool {
	return sb.ExpiredAt != nil || (sb.Status == sandboxes.StatusPaused && sb.IdleExpiresAt == nil)
}
