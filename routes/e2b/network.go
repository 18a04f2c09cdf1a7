package e2b

import (
	"net/http"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// NetworkUpdate is SandboxNetworkUpdateConfig, the body of PUT /sandboxes/{id}/network: it replaces the sandbox's
// egress rules, an omitted field clearing its rule.
type NetworkUpdate struct {
	AllowOut            []string       `json:"allowOut,omitempty"`
	DenyOut             []string       `json:"denyOut,omitempty"`
	EgressProxy         any            `json:"egressProxy,omitempty"`
	Rules               map[string]any `json:"rules,omitempty"`
	AllowInternetAccess *bool          `json:"allow_internet_access,omitempty"`
}

// updateNetwork (the SDK's updateNetwork) maps the new rules exactly as a create's (egressFor): on a profile whose
// sandboxes reach outside through the egress proxy alone, the sandbox's own policy is replaced and the proxy
// applies it to the next connection (a tunnel already open runs until it closes); on a profile that reaches
// nothing, cutting internet access is what it already is and is recorded. What the profile cannot enforce for one
// sandbox is refused with the reason, as at create, and nothing changes.
func (h *Handler) updateNetwork(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	var body NetworkUpdate
	if e := decodeJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	sb, st, e := h.sandbox(r.Context(), p, id)
	if e != nil {
		writeError(w, e)
		return
	}
	switch {
	case len(body.Rules) > 0:
		writeError(w, errorf(http.StatusBadRequest, "rules (request transforms) are not supported"))
		return
	case body.EgressProxy != nil:
		writeError(w, errorf(http.StatusBadRequest, "egressProxy is not supported: outbound traffic goes through the gateway's own egress proxy where the profile has one"))
		return
	}
	var prof *sandboxes.Profile
	for _, pr := range h.svc.Profiles() {
		if pr.ID == sb.Profile {
			prof = &pr
		}
	}
	if prof == nil {
		writeError(w, errorf(http.StatusConflict, "the sandbox's profile %q is no longer configured: its network cannot change", sb.Profile))
		return
	}
	eg, noInternet, e := egressFor(body.AllowInternetAccess, &NetworkConfig{AllowOut: body.AllowOut, DenyOut: body.DenyOut}, *prof)
	if e != nil {
		writeError(w, e)
		return
	}
	if prof.EgressEnforced() {
		if _, err := h.svc.SetEgress(r.Context(), p, id, eg); err != nil {
			writeError(w, toError(err))
			return
		}
	}
	if noInternet != st.NoInternet {
		var v *string
		if noInternet {
			one := "1"
			v = &one
		}
		if _, err := h.svc.PatchMetadata(r.Context(), p, id, map[string]*string{keyNoInternet: v}); err != nil {
			writeError(w, toError(err))
			return
		}
	}
	h.cfg.Logger.Info("e2b network update", "sandbox", id, "owner", p.Owner, "no_internet", noInternet)
	w.WriteHeader(http.StatusNoContent)
}
