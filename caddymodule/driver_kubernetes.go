package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/kubernetes"
)

func init() {
	caddy.RegisterModule(new(KubernetesDriver))
}

// KubernetesDriver is the `sandboxes.drivers.kubernetes` module: sandboxes are Pods in one namespace of a
// cluster, their workspaces PersistentVolumeClaims (docs/kubernetes.md).
type KubernetesDriver struct {
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
}

// CaddyModule returns the Caddy module information.
func (*KubernetesDriver) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "sandboxes.drivers.kubernetes", New: func() caddy.Module { return new(KubernetesDriver) }}
}

func (d *KubernetesDriver) config() kubernetes.Config {
	return kubernetes.Config{Kubeconfig: d.Kubeconfig, Namespace: d.Namespace, StorageClass: d.StorageClass,
		WorkspaceSize: d.WorkspaceSize, CPURequest: d.CPURequest, ImagePullPolicy: d.ImagePullPolicy,
		GatewayCIDRs: d.GatewayCIDRs, GatewayLabels: d.GatewayLabels, CopyImage: d.CopyImage, NoWorkspaceChown: d.NoWorkspaceChown}
}

// Validate checks the settings without any I/O.
func (d *KubernetesDriver) Validate() error { return kubernetes.ValidateConfig(d.config()) }

// Endpoint names the cluster and namespace: two gateways' Managers are one only when both are the same.
func (d *KubernetesDriver) Endpoint() string {
	ns := d.Namespace
	if ns == "" {
		ns = kubernetes.DefaultNamespace
	}
	cluster := d.Kubeconfig
	if cluster == "" {
		cluster = "in-cluster"
	}
	return "kubernetes:" + cluster + "#" + ns
}

// NewDriver reads the kubeconfig (or the in-cluster service account) and makes the client; it opens no connection.
func (d *KubernetesDriver) NewDriver() (sandboxes.Driver, error) { return kubernetes.New(d.config()) }

// UnmarshalCaddyfile reads
//
//	driver kubernetes {
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
//	}
func (d *KubernetesDriver) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the driver name
	if disp.NextArg() {
		return disp.ArgErr()
	}
	for disp.NextBlock(0) {
		opt := disp.Val()
		one := map[string]*string{"kubeconfig": &d.Kubeconfig, "namespace": &d.Namespace, "storage_class": &d.StorageClass,
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
	_ Driver                = (*KubernetesDriver)(nil)
	_ caddy.Validator       = (*KubernetesDriver)(nil)
	_ caddyfile.Unmarshaler = (*KubernetesDriver)(nil)
)
