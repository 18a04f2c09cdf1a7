package bayapi

import (
	"net/http"
	"strings"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// authenticate resolves the caller: a bearer key, or (only when allowed) an anonymous caller named by X-Owner.
func (h *Handler) authenticate(r *http.Request) (service.Principal, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		if h.cfg.AllowAnonymous {
			owner := strings.TrimSpace(r.Header.Get("X-Owner"))
			if owner == "" {
				owner = service.DefaultOwner
			}
			return service.Principal{Owner: owner}, nil
		}
		return service.Principal{}, service.Errorf(service.CodeUnauthorized, "Missing API key")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return service.Principal{}, service.Errorf(service.CodeUnauthorized, "Invalid authorization header")
	}
	p, ok := h.cfg.Keys.Lookup(strings.TrimSpace(token))
	if !ok {
		return service.Principal{}, service.Errorf(service.CodeUnauthorized, "Invalid API key")
	}
	return p, nil
}
