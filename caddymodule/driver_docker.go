package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/docker"
)

func init() {
	caddy.RegisterModule(new(DockerDriver))
}

// DockerDriver is the `sandboxes.drivers.docker` module: sandboxes are containers on one Docker engine.
type DockerDriver struct {
	// Host is the engine endpoint (unix:///var/run/docker.sock, tcp://...); empty means DOCKER_HOST or the default socket.
	Host string `json:"host,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*DockerDriver) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandboxes.drivers.docker", New: func() caddy.Module { return new(DockerDriver) }}
}

// Endpoint names the engine.
func (d *DockerDriver) Endpoint() string {
	if d.Host == "" {
		return "docker:default"
	}
	return "docker:" + d.Host
}

// NewDriver makes the Engine API client (API version negotiated: the engine may be as old as 20.10 / API 1.41).
// It does no I/O.
func (d *DockerDriver) NewDriver() (sandboxes.Driver, error) { return docker.New(d.Host) }

// UnmarshalCaddyfile reads
//
//	driver docker {
//	    host <endpoint>
//	}
func (d *DockerDriver) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the driver name
	if disp.NextArg() {
		return disp.ArgErr()
	}
	return opt.Block{
		"host": opt.String(&d.Host),
		// Sandbox state shared by a fleet lives in the Kubernetes API; a Docker host is one gateway's.
		"state": func(disp *caddyfile.Dispenser) error {
			return disp.Errf("state is an option of the kubernetes driver (a gateway fleet keeps sandbox records in the Kubernetes API); the docker driver keeps them in the gateway's own store")
		},
	}.Parse(disp, "unknown docker driver option %q")
}

var (
	_ Driver                = (*DockerDriver)(nil)
	_ caddyfile.Unmarshaler = (*DockerDriver)(nil)
)
