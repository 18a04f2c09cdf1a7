package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/sandgate/sandgate/routes/admin"
	"github.com/sandgate/sandgate/sandboxes/service"
)

func init() {
	caddy.RegisterModule(new(AdminAPI))
}

// AdminAPI is `admin.api.sandboxes`: list, create, inspect, delete, pause, resume, fork and snapshot sandboxes on
// Caddy's admin endpoint (routes/admin serves them; it has no authentication of its own: keep the endpoint on
// localhost or a unix socket).
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (*AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.sandboxes", New: func() caddy.Module { return new(AdminAPI) }}
}

// Routes returns the admin routes; the Manager is looked up per request (runningManager, app.go) and
// reached through a lifecycle-only service, the one road into the core.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	h := &admin.Handler{Service: runningService}
	var routes []caddy.AdminRoute
	for _, rt := range h.Routes() {
		routes = append(routes, caddy.AdminRoute{Pattern: rt.Pattern, Handler: adminHandler(rt.Handler)})
	}
	return routes
}

// runningService is the lifecycle-only service over the running Manager, nil when none runs.
func runningService() *service.Service {
	m := runningManager()
	if m == nil {
		return nil
	}
	return service.New(service.Config{Sandboxes: m})
}

// adminHandler answers a route's failure in Caddy's admin envelope with the status routes/admin chose.
func adminHandler(h admin.HandlerFunc) caddy.AdminHandler {
	return caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		err := h(w, r)
		var ae *admin.Error
		if errors.As(err, &ae) {
			return caddy.APIError{HTTPStatus: ae.Status, Err: ae.Err}
		}
		return err
	})
}

var _ caddy.AdminRouter = (*AdminAPI)(nil)
