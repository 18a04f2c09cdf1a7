package e2b

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// maxBody bounds a control-plane request body.
const maxBody = 1 << 20

// DefaultTimeout is a sandbox's lifetime when the create names none (E2B's default).
const DefaultTimeout = 300 * time.Second

// DefaultTemplate is what a create without templateID asks for (the SDK's default).
const DefaultTemplate = "base"

// decodeJSON reads a JSON body (the SDK streams it chunked, without Content-Length); an empty body is {}.
func decodeJSON(r *http.Request, v any) *Error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	return nil
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, p service.Principal) {
	var req NewSandbox
	if e := decodeJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	lc, st, e := h.translateCreate(r, p, req)
	if e != nil {
		writeError(w, e)
		return
	}
	sb, err := h.svc.CreateLabelled(r.Context(), p, lc)
	if err != nil {
		writeError(w, toError(err))
		return
	}
	h.cfg.Logger.Info("e2b create", "sandbox", sb.ID, "owner", p.Owner, "template", st.Template, "profile", sb.Profile)
	out, e := h.answer(sb, st)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// answer is the Sandbox answer of create, connect and fork, with the sandbox's tokens.
func (h *Handler) answer(sb sandboxes.Sandbox, st state) (Sandbox, *Error) {
	envd, err := h.svc.SandboxAccessKey(sb.ID, purposeEnvd)
	if err != nil {
		return Sandbox{}, toError(err)
	}
	out := Sandbox{SandboxID: sb.ID, TemplateID: st.Template, Alias: st.Template, ClientID: clientID,
		EnvdVersion: envdVersion, EnvdAccessToken: envd, Domain: h.domain()}
	if st.Private {
		traffic, err := h.svc.SandboxAccessKey(sb.ID, purposeTraffic)
		if err != nil {
			return Sandbox{}, toError(err)
		}
		out.TrafficAccessToken = &traffic
	}
	return out, nil
}

// translateCreate checks a create body and turns it into the service's request. Everything E2B asks for that
// sandgate cannot honour is refused with a 400 naming the field; an unknown template is E2B's 404. Nothing is
// created before every check passed.
func (h *Handler) translateCreate(r *http.Request, p service.Principal, req NewSandbox) (service.LabelledCreate, state, *Error) {
	bad := func(format string, args ...any) (service.LabelledCreate, state, *Error) {
		return service.LabelledCreate{}, state{}, errorf(http.StatusBadRequest, format, args...)
	}
	switch {
	case len(req.VolumeMounts) > 0:
		return bad("volumeMounts: E2B volumes are not supported; a sandbox's persistent storage is its own workspace (snapshots and fork copy it)")
	case req.MCP != nil:
		return bad("mcp: the MCP gateway template is not served by sandgate; sandgate's own MCP server is at /mcp of the gateway")
	case req.IAM != nil:
		return bad("iam: workload identity tokens are not supported")
	case req.AutoPauseMemory != nil && (req.AutoPause == nil || !*req.AutoPause):
		return bad("autoPauseMemory applies only with autoPause true")
	case req.AutoPauseMemory != nil && !*req.AutoPauseMemory && req.AutoResume != nil && req.AutoResume.Enabled:
		return bad("autoResume: a sandbox auto-paused without its memory (autoPauseMemory false) cannot be auto-resumed by traffic; resume it with connect")
	case req.Secure != nil && !*req.Secure:
		return bad("secure false: every sandgate sandbox's envd requires its access token")
	}
	if nw := req.Network; nw != nil {
		switch {
		case nw.MaskRequestHost != nil:
			return bad("network.maskRequestHost is not supported: the sandbox sees the Host the client sent")
		case len(nw.HTTPSPorts) > 0:
			return bad("network.httpsPorts is not supported: the gateway terminates TLS for every port")
		case len(nw.Rules) > 0:
			return bad("network.rules (request transforms) are not supported")
		case nw.EgressProxy != nil:
			return bad("network.egressProxy is not supported: outbound traffic goes through the gateway's own egress proxy where the profile has one")
		}
	}
	name := req.TemplateID
	if name == "" {
		name = DefaultTemplate
	}
	lc := service.LabelledCreate{UnguessableID: true, OnExpire: onExpire(req)}
	if lc.OnExpire == sandboxes.ExpirePause {
		if err := h.svc.CanPause(); err != nil {
			return service.LabelledCreate{}, state{}, errorf(http.StatusBadRequest, "autoPause: %s; create without it, or with autoPauseMemory false (the sandbox is stopped at its timeout, its files kept)", toError(err).Message)
		}
	}
	profileID, ok := h.cfg.Templates[name]
	if ok {
		lc.Profile = profileID
	} else {
		snap, e := h.snapshotTemplate(r, p, name)
		if e != nil {
			return service.LabelledCreate{}, state{}, e
		}
		lc.Profile, lc.Snapshot = snap.Profile, snap.ID
	}
	var prof *sandboxes.Profile
	for _, pr := range h.svc.Profiles() {
		if pr.ID == lc.Profile {
			prof = &pr
		}
	}
	if prof == nil {
		return service.LabelledCreate{}, state{}, errorf(http.StatusNotFound, "template '%s' not found (its profile %q is not configured)", name, lc.Profile)
	}
	ttl, e := h.ttlOf(req.Timeout, DefaultTimeout)
	if e != nil {
		return service.LabelledCreate{}, state{}, e
	}
	lc.TTL = ttl
	st := state{Template: name, Env: map[string]string{}, Tenant: map[string]string{},
		AutoResume: req.AutoResume != nil && req.AutoResume.Enabled}
	for k, v := range req.Metadata {
		if strings.HasPrefix(k, reservedPrefix) {
			return bad("metadata key %q: the %s prefix is reserved", k, reservedPrefix)
		}
		st.Tenant[k] = v
	}
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=&\x00") || strings.ContainsRune(v, 0) {
			return bad("envVars %q: invalid name or value", k)
		}
		if strings.HasPrefix(strings.ToUpper(k), "SANDGATE_") {
			return bad("envVars %q: SANDGATE_* variables configure the sandbox's agent and are the operator's", k)
		}
		st.Env[k] = v
	}
	eg, noInternet, e := egressFor(req.AllowInternetAccess, req.Network, *prof)
	if e != nil {
		return service.LabelledCreate{}, state{}, e
	}
	lc.Egress, st.NoInternet = eg, noInternet
	st.Private = req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic
	lc.Metadata = e2bMetadata(st)
	if err := sandboxes.ValidateMetadata(lc.Metadata); err != nil {
		return bad("metadata and envVars: %s (E2B keeps each env var as one entry beside the metadata)", toError(err).Message)
	}
	return lc, st, nil
}

// snapshotTemplate resolves a templateID that names no template: one of the caller's snapshots (E2B creates from a
// snapshot by naming it as the template), else E2B's 404.
func (h *Handler) snapshotTemplate(r *http.Request, p service.Principal, name string) (sandboxes.Snapshot, *Error) {
	notFound := errorf(http.StatusNotFound, "template '%s' not found", name)
	if h.svc.CanSnapshot() != nil {
		return sandboxes.Snapshot{}, notFound
	}
	snap, err := h.svc.GetSnapshot(r.Context(), p, strings.TrimSuffix(name, ":default"))
	if err != nil {
		if e := toError(err); e.Status != http.StatusNotFound {
			return sandboxes.Snapshot{}, e
		}
		return sandboxes.Snapshot{}, notFound
	}
	return snap, nil
}

// ttlOf reads a timeout in seconds; absent is def.
func (h *Handler) ttlOf(timeout *int64, def time.Duration) (time.Duration, *Error) {
	if timeout == nil {
		return def, nil
	}
	t := *timeout
	if t <= 0 || t > 10*365*24*3600 {
		return 0, errorf(http.StatusBadRequest, "timeout must be a positive number of seconds")
	}
	d := time.Duration(t) * time.Second
	if h.cfg.MaxTimeout > 0 && d > h.cfg.MaxTimeout {
		return 0, errorf(http.StatusBadRequest, "timeout %ds is over this gateway's maximum of %.0fs", t, h.cfg.MaxTimeout.Seconds())
	}
	return d, nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// onExpire maps E2B's autoPause onto the Manager's expiry action: a full pause (memory and processes kept) is the
// cgroup freezer; autoPauseMemory false, E2B's filesystem-only snapshot that reboots on resume, is a stop that
// keeps the workspace. Either is kept for the Manager's retention (sandboxes.ExpiryRetention), then deleted.
func onExpire(req NewSandbox) string {
	switch {
	case req.AutoPause == nil || !*req.AutoPause:
		return ""
	case req.AutoPauseMemory != nil && !*req.AutoPauseMemory:
		return sandboxes.ExpireStop
	}
	return sandboxes.ExpirePause
}
