// Package driver is the sandboxes.Driver for one Kubernetes namespace, through client-go. A sandbox's
// container is a Pod (our agent and the profile's image, hardened as the Docker driver hardens a container), its
// workspace a PersistentVolumeClaim, and its isolation a NetworkPolicy. Every lifecycle decision stays the
// Manager's; this package only maps the Driver's calls onto API objects (objects.go) and reports what the
// cluster sees (state.go, events.go).
//
// A Docker container outlives its process: created, running, stopped and dead are all states of one object the
// Manager can inspect and start again. A Pod cannot be restarted, so the "container" here is a container record
// standing for the Pod (records.go): a ConfigMap holding it (mode pods), or a kubernetes-sigs/agent-sandbox
// Sandbox whose podTemplate it is (mode agent_sandbox, agentsandbox.go). Either way (lifecycle.go):
//
//	created, not started: the record, no Pod
//	running:              the record and its Pod
//	stopped (idle):       the record, no Pod (Stop deletes the Pod; the PVC stays)
//	dead:                 the record and its terminated Pod, kept until Start or Remove so its exit can be read
//
// The record is the owner of the Pod and the NetworkPolicy, so the cluster's garbage collector removes them with
// it even when the gateway is gone.
package driver

import (
	"context"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// Defaults for a Config's unset fields.
const (
	DefaultNamespace     = "sandgate"
	DefaultWorkspaceSize = "1Gi"
	DefaultCPURequest    = "100m"
	// DefaultGatewayLabel selects the gateway's own Pods in the NetworkPolicy when no gateway_cidr or
	// gateway_labels are configured: the label of the example Deployment in docs/kubernetes.md.
	DefaultGatewayLabel = "app.kubernetes.io/name=sandgate-gateway"
)

// The driver's modes: what a container record is (records.go).
const (
	// ModePods keeps each record as a ConfigMap and creates its Pod itself: nothing needs installing in the
	// cluster. The default.
	ModePods = "pods"
	// ModeAgentSandbox keeps each record as a kubernetes-sigs/agent-sandbox Sandbox (agents.x-k8s.io/v1beta1)
	// whose controller creates and deletes its Pod: the CRDs and the controller must be installed.
	ModeAgentSandbox = "agent_sandbox"
)

// Config is how the driver reaches its cluster and shapes its objects.
type Config struct {
	// Mode is ModePods (default) or ModeAgentSandbox.
	Mode string
	// Kubeconfig is a kubeconfig file; empty means the in-cluster service account (KUBECONFIG is not read, so a
	// gateway never talks to a cluster its configuration does not name).
	Kubeconfig string
	// Namespace holds every object of every sandbox. It must exist.
	Namespace string
	// StorageClass names the workspaces' StorageClass; empty takes the cluster's default class.
	StorageClass string
	// WorkspaceSize is each workspace PVC's storage request. Default 1Gi.
	WorkspaceSize string
	// CPURequest is each sandbox's CPU request (its limit is the profile's cpus). The memory request equals the
	// limit: memory cannot be overcommitted safely, CPU can. Default 100m, capped at the limit.
	CPURequest string
	// ImagePullPolicy is the sandbox container's: Always, IfNotPresent (default) or Never.
	ImagePullPolicy string
	// GatewayCIDRs and GatewayLabels say where the gateway's connections come from; the NetworkPolicy admits
	// only those to the agent port. Both empty: Pods labelled DefaultGatewayLabel, in any namespace.
	GatewayCIDRs  []string
	GatewayLabels map[string]string
	// CopyImage runs the copy Pods of workspace copies (copy.go); it needs sh, du, cp and find. Default
	// DefaultCopyImage.
	CopyImage string
	// NoWorkspaceChown leaves out the init container that gives the workspace's root directory to the sandbox
	// user. Storage that honours the Pod's fsGroup needs no such step; host-path and some NFS provisioners do.
	NoWorkspaceChown bool
	// RuntimeClasses maps a profile's runtime to the RuntimeClass its Pods name (runtimeClassName). A runtime not
	// listed is named as it is, except runsc, whose default class is DefaultGVisorRuntimeClass.
	RuntimeClasses map[string]string
}

// DefaultGVisorRuntimeClass is the RuntimeClass of a profile with `runtime runsc` unless RuntimeClasses says
// otherwise: the name gVisor's documentation and GKE Sandbox give it.
const DefaultGVisorRuntimeClass = "gvisor"

// runtimeClass is the RuntimeClass of a profile's runtime ("" for none: the node's default handler).
func (c Config) runtimeClass(runtime string) string {
	if runtime == "" {
		return ""
	}
	if rc, ok := c.RuntimeClasses[runtime]; ok {
		return rc
	}
	if runtime == sandboxes.RuntimeGVisor {
		return DefaultGVisorRuntimeClass
	}
	return runtime
}

// Driver talks to one namespace of one cluster.
type Driver struct {
	cs   kubernetes.Interface
	cfg  Config
	recs records

	workspaceSize resource.Quantity
	cpuRequest    resource.Quantity
}

// New makes a driver from cfg. It reads the kubeconfig file but opens no connection.
func New(cfg Config) (*Driver, error) {
	rc, err := clientConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	var dyn dynamic.Interface
	if cfg.Mode == ModeAgentSandbox {
		if dyn, err = dynamic.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("kubernetes client for agent-sandbox: %w", err)
		}
	}
	return NewWithClients(cs, dyn, cfg)
}

// NewClientset is the client New gives a driver: the kubeconfig file, or the in-cluster service account when it is
// empty. It reads the file but opens no connection. Tests use it to look at a cluster as the driver sees it.
func NewClientset(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := clientConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// clientConfig is the REST config of the driver's clients.
func clientConfig(kubeconfig string) (*rest.Config, error) {
	rc, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	// A busy gateway lists and watches much more than client-go's default 5 requests a second allows.
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig configured and not running in a cluster: %w", err)
		}
		return rc, nil
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}

// NewWithClients makes a driver on existing clients; dyn reaches the agent-sandbox resources, and only mode
// agent_sandbox needs it.
func NewWithClients(cs kubernetes.Interface, dyn dynamic.Interface, cfg Config) (*Driver, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModePods
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.WorkspaceSize == "" {
		cfg.WorkspaceSize = DefaultWorkspaceSize
	}
	if cfg.CPURequest == "" {
		cfg.CPURequest = DefaultCPURequest
	}
	if err := ValidateConfig(cfg); err != nil {
		return nil, err
	}
	d := &Driver{cs: cs, cfg: cfg,
		workspaceSize: resource.MustParse(cfg.WorkspaceSize), cpuRequest: resource.MustParse(cfg.CPURequest)}
	d.recs = configMapRecords{d}
	if cfg.Mode == ModeAgentSandbox {
		if dyn == nil {
			return nil, fmt.Errorf("kubernetes mode %s needs a dynamic client", cfg.Mode)
		}
		d.recs = newSandboxRecords(d, dyn)
	}
	return d, nil
}

// ValidateConfig checks cfg without any I/O (the Caddy module calls it at provision).
func ValidateConfig(cfg Config) error {
	switch cfg.Mode {
	case "", ModePods, ModeAgentSandbox:
	default:
		return fmt.Errorf("kubernetes mode %q: want %s or %s", cfg.Mode, ModePods, ModeAgentSandbox)
	}
	if cfg.Namespace != "" {
		if errs := kubenames.Validate(cfg.Namespace); errs != "" {
			return fmt.Errorf("kubernetes namespace %q: %s", cfg.Namespace, errs)
		}
	}
	for what, q := range map[string]string{"workspace_size": cfg.WorkspaceSize, "cpu_request": cfg.CPURequest} {
		if q == "" {
			continue
		}
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("kubernetes %s %q: %w", what, q, err)
		}
		if v.Sign() <= 0 {
			return fmt.Errorf("kubernetes %s %q must be positive", what, q)
		}
	}
	for runtime, rc := range cfg.RuntimeClasses {
		if runtime == "" {
			return fmt.Errorf("kubernetes runtime_class: the runtime must not be empty")
		}
		if errs := validation.IsDNS1123Subdomain(rc); len(errs) > 0 {
			return fmt.Errorf("kubernetes runtime_class %s %q: %s", runtime, rc, strings.Join(errs, "; "))
		}
	}
	switch cfg.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		return fmt.Errorf("kubernetes image_pull_policy %q: want Always, IfNotPresent or Never", cfg.ImagePullPolicy)
	}
	for _, c := range cfg.GatewayCIDRs {
		if _, err := parseCIDR(c); err != nil {
			return fmt.Errorf("kubernetes gateway_cidr %q: %w", c, err)
		}
	}
	for k, v := range cfg.GatewayLabels {
		if !kubenames.ValidLabelKey(k) || !kubenames.ValidLabelValue(v) {
			return fmt.Errorf("kubernetes gateway_labels %s=%s is not a valid label", k, v)
		}
	}
	return nil
}

// Namespace is the Kubernetes namespace the driver works in.
func (d *Driver) Namespace() string { return d.cfg.Namespace }

// Client is the underlying clientset (tests use it to look at what the driver made).
func (d *Driver) Client() kubernetes.Interface { return d.cs }

// EnsureNetwork has nothing to create: a sandbox's isolation is its own NetworkPolicy, made with its record by
// Create (objects.go), and the Pod network is the cluster's.
func (d *Driver) EnsureNetwork(context.Context, string, bool, map[string]string) error { return nil }

// Close releases nothing: the clientset holds no connection that outlives a request or a watch's context.
func (d *Driver) Close() error { return nil }

// unsupported is the typed error of a profile feature this driver cannot give; the sandbox fails with it instead
// of running without what its profile promised.
func unsupported(feature, hint string) error {
	return &sandboxes.Error{Code: sandboxes.CodeCapabilityAbsent,
		Message: fmt.Sprintf("the kubernetes driver does not support %s; %s", feature, hint),
		Details: map[string]any{"capability": feature, "driver": "kubernetes"}}
}

var (
	_ sandboxes.Driver = (*Driver)(nil)
)
