package kubernetes

import (
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/caddymodule"
	"github.com/sandgate/sandgate/kubernetes/driver"
	"github.com/sandgate/sandgate/sandboxes"
)

func init() {
	caddy.RegisterModule(new(Driver))
}

// Driver is the `sandboxes.drivers.kubernetes` module: sandboxes are Pods in one namespace of a
// cluster, their workspaces PersistentVolumeClaims (docs/kubernetes.md).
type Driver struct {
	// Mode is what stands for a sandbox while its Pod is not running: "pods" (default; ConfigMaps, nothing to
	// install) or "agent_sandbox" (kubernetes-sigs/agent-sandbox Sandboxes, whose controller runs the Pods).
	Mode string `json:"mode,omitempty"`
	// Kubeconfig is a kubeconfig file; empty means the in-cluster service account.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Namespace holds every sandbox's objects; it must exist. Default "sandgate".
	Namespace string `json:"namespace,omitempty"`
	// StorageClass of the workspace claims; empty takes the cluster's default.
	StorageClass string `json:"storage_class,omitempty"`
	// WorkspaceSize is each workspace claim's request (default 1Gi).
	WorkspaceSize string `json:"workspace_size,omitempty"`
	// CPURequest is each sandbox's CPU request; its limit is the profile's cpus (default 100m).
	CPURequest string `json:"cpu_request,omitempty"`
	// ImagePullPolicy is Always, IfNotPresent (default) or Never.
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// GatewayCIDRs and GatewayLabels are where the gateway connects from: the only peers each sandbox's
	// NetworkPolicy admits.
	GatewayCIDRs  []string          `json:"gateway_cidrs,omitempty"`
	GatewayLabels map[string]string `json:"gateway_labels,omitempty"`
	// CopyImage runs the copy Pods of workspace copies (snapshots, forks); default sandgate/sandbox:base.
	CopyImage string `json:"copy_image,omitempty"`
	// NoWorkspaceChown leaves out the step that gives the workspace's root directory to the sandbox user, for
	// storage that honours fsGroup.
	NoWorkspaceChown bool `json:"no_workspace_chown,omitempty"`
	// RuntimeClasses maps a profile's runtime to its Pods' RuntimeClass; runsc defaults to "gvisor", any other
	// runtime to its own name.
	RuntimeClasses map[string]string `json:"runtime_classes,omitempty"`
	// State, when set, keeps the sandbox records in the Kubernetes API instead of the gateway's own store, so a
	// fleet of gateways shares them (docs/kubernetes.md, "Gateway fleet: sandbox state").
	State *State `json:"state,omitempty"`
}

// State is `state kubernetes { ... }`: sandbox records in Secrets and a Lease for the collector.
type State struct {
	// Identity names this gateway in the fleet (the Lease holder); default: host name and a random suffix.
	Identity string `json:"identity,omitempty"`
	// LeaseDuration, RenewDeadline and RetryPeriod are the GC Lease's timings (default 15s, 10s, 2s).
	LeaseDuration caddy.Duration `json:"lease_duration,omitempty"`
	RenewDeadline caddy.Duration `json:"renew_deadline,omitempty"`
	RetryPeriod   caddy.Duration `json:"retry_period,omitempty"`
}

func (st *State) config(namespace, manager string) driver.StateConfig {
	return driver.StateConfig{Namespace: namespace, Manager: manager, Identity: st.Identity,
		LeaseDuration: time.Duration(st.LeaseDuration), RenewDeadline: time.Duration(st.RenewDeadline),
		RetryPeriod: time.Duration(st.RetryPeriod)}
}

// NewStore is the Manager's store: the StateStore over local with state kubernetes, else local itself.
func (d *Driver) NewStore(drv sandboxes.Driver, manager string, local *sandboxes.BoltStore) (sandboxes.Store, error) {
	if d.State == nil {
		return local, nil
	}
	kd, ok := drv.(*driver.Driver)
	if !ok {
		return nil, fmt.Errorf("state kubernetes: the driver is %T, not the kubernetes driver", drv)
	}
	return driver.NewStateStore(kd.Client(), d.State.config(kd.Namespace(), manager), local)
}

// CaddyModule returns the Caddy module information.
func (*Driver) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandboxes.drivers.kubernetes", New: func() caddy.Module { return new(Driver) }}
}

func (d *Driver) config() driver.Config {
	return driver.Config{Mode: d.Mode, Kubeconfig: d.Kubeconfig, Namespace: d.Namespace, StorageClass: d.StorageClass,
		WorkspaceSize: d.WorkspaceSize, CPURequest: d.CPURequest, ImagePullPolicy: d.ImagePullPolicy,
		GatewayCIDRs: d.GatewayCIDRs, GatewayLabels: d.GatewayLabels, CopyImage: d.CopyImage, NoWorkspaceChown: d.NoWorkspaceChown,
		RuntimeClasses: d.RuntimeClasses}
}

// Validate checks the settings without any I/O.
func (d *Driver) Validate() error {
	if err := driver.ValidateConfig(d.config()); err != nil {
		return err
	}
	if d.State != nil {
		if d.State.LeaseDuration < 0 || d.State.RenewDeadline < 0 || d.State.RetryPeriod < 0 {
			return fmt.Errorf("state kubernetes: lease durations must not be negative")
		}
		// The defaults and their order are checked by building the store's config once (it does no I/O).
		if _, err := driver.CheckStateConfig(d.State.config(d.Namespace, "")); err != nil {
			return fmt.Errorf("state kubernetes: %w", err)
		}
	}
	return nil
}

// Endpoint names the cluster and namespace: two gateways' Managers are one only when both are the same.
func (d *Driver) Endpoint() string {
	ns := d.Namespace
	if ns == "" {
		ns = driver.DefaultNamespace
	}
	cluster := d.Kubeconfig
	if cluster == "" {
		cluster = "in-cluster"
	}
	return "kubernetes:" + cluster + "#" + ns
}

// NewDriver reads the kubeconfig (or the in-cluster service account) and makes the client; it opens no connection.
func (d *Driver) NewDriver() (sandboxes.Driver, error) { return driver.New(d.config()) }

// UnmarshalCaddyfile reads
//
//	driver kubernetes {
//	    mode              pods|agent_sandbox
//	    kubeconfig        <path>
//	    namespace         <ns>
//	    storage_class     <name>
//	    workspace_size    <quantity>
//	    cpu_request       <quantity>
//	    image_pull_policy Always|IfNotPresent|Never
//	    gateway_cidr      <cidr...>
//	    gateway_label     <key> <value>
//	    copy_image        <image>
//	    workspace_chown   on|off
//	    runtime_class     <runtime> <RuntimeClass>   # runsc -> gvisor unless set
//	    state kubernetes {              # sandbox records in the API: a gateway fleet
//	        identity       <name>
//	        lease_duration <duration>
//	        renew_deadline <duration>
//	        retry_period   <duration>
//	    }
//	}
func (d *Driver) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the driver name
	if disp.NextArg() {
		return disp.ArgErr()
	}
	for disp.NextBlock(0) {
		opt := disp.Val()
		one := map[string]*string{"mode": &d.Mode, "kubeconfig": &d.Kubeconfig, "namespace": &d.Namespace, "storage_class": &d.StorageClass,
			"workspace_size": &d.WorkspaceSize, "cpu_request": &d.CPURequest, "image_pull_policy": &d.ImagePullPolicy,
			"copy_image": &d.CopyImage}
		if dst, ok := one[opt]; ok {
			if !disp.AllArgs(dst) {
				return disp.ArgErr()
			}
			continue
		}
		switch opt {
		case "gateway_cidr":
			args := disp.RemainingArgs()
			if len(args) == 0 {
				return disp.ArgErr()
			}
			d.GatewayCIDRs = append(d.GatewayCIDRs, args...)
		case "gateway_label":
			var k, v string
			if !disp.AllArgs(&k, &v) {
				return disp.ArgErr()
			}
			if d.GatewayLabels == nil {
				d.GatewayLabels = map[string]string{}
			}
			d.GatewayLabels[k] = v
		case "runtime_class":
			var runtime, class string
			if !disp.AllArgs(&runtime, &class) {
				return disp.ArgErr()
			}
			if d.RuntimeClasses == nil {
				d.RuntimeClasses = map[string]string{}
			}
			d.RuntimeClasses[runtime] = class
		case "state":
			if err := d.unmarshalState(disp); err != nil {
				return err
			}
		case "workspace_chown":
			var v string
			if !disp.AllArgs(&v) {
				return disp.ArgErr()
			}
			switch strings.ToLower(v) {
			case "on":
				d.NoWorkspaceChown = false
			case "off":
				d.NoWorkspaceChown = true
			default:
				return disp.Errf("workspace_chown: want on or off, got %q", v)
			}
		default:
			return disp.Errf("unknown kubernetes driver option %q", opt)
		}
	}
	if err := d.Validate(); err != nil {
		return disp.Errf("%v", err)
	}
	return nil
}

var (
	_ caddymodule.Driver    = (*Driver)(nil)
	_ caddy.Validator       = (*Driver)(nil)
	_ caddyfile.Unmarshaler = (*Driver)(nil)
)

// unmarshalState reads `state kubernetes [{ ... }]` (or `state local`, the default: the gateway's own store).
func (d *Driver) unmarshalState(disp *caddyfile.Dispenser) error {
	var kind string
	if !disp.Args(&kind) {
		return disp.ArgErr()
	}
	switch kind {
	case "local":
		d.State = nil
		if disp.NextArg() {
			return disp.ArgErr()
		}
		return nil
	case "kubernetes":
	default:
		return disp.Errf("state: want local or kubernetes, got %q", kind)
	}
	if disp.NextArg() {
		return disp.ArgErr()
	}
	st := &State{}
	for nesting := disp.Nesting(); disp.NextBlock(nesting); {
		opt := disp.Val()
		if opt == "identity" {
			if !disp.AllArgs(&st.Identity) {
				return disp.ArgErr()
			}
			continue
		}
		dst := map[string]*caddy.Duration{"lease_duration": &st.LeaseDuration, "renew_deadline": &st.RenewDeadline,
			"retry_period": &st.RetryPeriod}[opt]
		if dst == nil {
			return disp.Errf("unknown state kubernetes option %q", opt)
		}
		var v string
		if !disp.AllArgs(&v) {
			return disp.ArgErr()
		}
		dur, err := caddy.ParseDuration(v)
		if err != nil {
			return disp.Errf("state kubernetes %s: %v", opt, err)
		}
		*dst = caddy.Duration(dur)
	}
	d.State = st
	return nil
}
