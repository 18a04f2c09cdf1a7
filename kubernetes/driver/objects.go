package driver

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// The objects of one sandbox, built from the Manager's ContainerSpec without any I/O.

// SandboxUID is the uid and gid every sandbox runs as (the images' `sandbox` user), as on Docker.
const SandboxUID = 65532

// containerName is the sandbox container's name inside its Pod.
const containerName = "sandbox"

// Defaults for profiles that leave a resource unset (the Docker driver's).
const (
	DefaultMemory   = "1Gi"
	DefaultCPUs     = 1.0
	DefaultDisk     = 256 << 20
	browserShmBytes = 256 << 20
	// grace is the Pod's termination grace period; Stop passes the Manager's own.
	grace = 10
)

// checkSpec refuses what a Pod cannot be, before anything is made.
func checkSpec(spec sandboxes.ContainerSpec) error {
	p := spec.Profile
	switch {
	case p.Network == sandboxes.NetworkNone || spec.AgentSocketDir != "":
		return unsupported("network none", "use network internal: its NetworkPolicy admits only the gateway and allows no egress")
	case p.Network != "" && p.Network != sandboxes.NetworkInternal && p.Network != sandboxes.NetworkBridge:
		return unsupported("named networks ("+p.Network+")", "use internal or bridge; isolation is a NetworkPolicy")
	case len(spec.HostBinds) > 0:
		return unsupported("host binds", "a sandbox's only volume is its workspace PVC")
	case spec.AgentImage != "":
		return unsupported("injecting the agent into another image (inject_agent, entrypoint, cmd)", "use an image that carries the agent (sandgate/sandbox:*)")
	case p.ConnectMode == sandboxes.ConnectHostPort:
		return unsupported("connect_mode host_port", "the gateway reaches agents at their Pod IPs")
	case p.User != nil:
		return unsupported("a profile's user ("+p.User.Name+")", "sandboxes run as the images' sandbox user, uid 65532")
	}
	if _, err := memoryOf(p); err != nil {
		return err
	}
	if _, err := diskOf(p); err != nil {
		return err
	}
	return nil
}

func memoryOf(p sandboxes.Profile) (resource.Quantity, error) {
	if p.Resources.Memory == "" {
		return resource.MustParse(DefaultMemory), nil
	}
	v, err := sandboxes.ParseBytes(p.Resources.Memory)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("profile %s memory: %w", p.ID, err)
	}
	return *resource.NewQuantity(v, resource.BinarySI), nil
}

func diskOf(p sandboxes.Profile) (resource.Quantity, error) {
	if p.Resources.Disk == "" {
		return *resource.NewQuantity(DefaultDisk, resource.BinarySI), nil
	}
	v, err := sandboxes.ParseBytes(p.Resources.Disk)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("profile %s disk: %w", p.ID, err)
	}
	return *resource.NewQuantity(v, resource.BinarySI), nil
}

// podFor is the Pod of a sandbox container: hardened as the Docker driver's HostConfig is (non-root, no
// capabilities, no privilege escalation, default seccomp, read-only root with sized memory-backed scratch space,
// memory limit without overcommit, CPU limit, an init reaping orphans), with no service account token and no
// service links, and never restarted by the kubelet: a death is the Manager's to see and handle.
func (d *Driver) podFor(spec sandboxes.ContainerSpec) (*corev1.Pod, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	p := spec.Profile
	name := kubenames.Object(spec.Name)
	mem, _ := memoryOf(p)
	disk, _ := diskOf(p)
	cpus := p.Resources.CPUs
	if cpus == 0 {
		cpus = DefaultCPUs
	}
	cpuLimit := *resource.NewMilliQuantity(int64(cpus*1000), resource.DecimalSI)
	cpuRequest := d.cpuRequest.DeepCopy()
	if cpuRequest.Cmp(cpuLimit) > 0 {
		cpuRequest = cpuLimit.DeepCopy()
	}
	yes, no := true, false
	uid := int64(SandboxUID)
	graceSecs := int64(grace)
	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	scratch := func(volName string, size resource.Quantity) corev1.Volume {
		return corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	}
	volumes := []corev1.Volume{
		{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: kubenames.Object(spec.Volume)}}},
		scratch("tmp", disk),
		scratch("home", disk),
	}
	mounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: "/workspace"},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "home", MountPath: sandboxes.SandboxHome},
	}
	if p.HasCapability(sandboxes.CapBrowser) {
		volumes = append(volumes, scratch("shm", *resource.NewQuantity(browserShmBytes, resource.BinarySI)))
		mounts = append(mounts, corev1.VolumeMount{Name: "shm", MountPath: "/dev/shm"})
	}
	pullPolicy := corev1.PullPolicy(d.cfg.ImagePullPolicy)
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	ctr := corev1.Container{
		Name:            containerName,
		Image:           spec.Image,
		ImagePullPolicy: pullPolicy,
		Env:             env,
		Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: int32(spec.AgentPort), Protocol: corev1.ProtocolTCP}},
		VolumeMounts:    mounts,
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: cpuLimit, corev1.ResourceMemory: mem},
			Requests: corev1.ResourceList{corev1.ResourceCPU: cpuRequest, corev1.ResourceMemory: mem},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
			Privileged: &no, AllowPrivilegeEscalation: &no,
			// A profile's writable_root is the one explicit relaxation, for images that write to /etc or /var.
			ReadOnlyRootFilesystem: boolPtr(!p.WritableRoot),
			Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:         seccomp,
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.cfg.Namespace,
			Labels:      podLabels(spec),
			Annotations: kubenames.Annotations(spec.Name, spec.Labels),
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ShareProcessNamespace:         &yes, // the pause process is PID 1 and reaps orphans, as Docker's --init
			Hostname:                      "sandbox",
			TerminationGracePeriodSeconds: &graceSecs,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes, FSGroup: &uid,
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{ctr},
			Volumes:    volumes,
		},
	}
	if len(p.HostAliases) > 0 { // names of the sandbox itself (Ship's `ship`, sandboxes/profile_ship.go)
		pod.Spec.HostAliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: slices.Clone(p.HostAliases)}}
	}
	if rc := d.cfg.runtimeClass(p.Runtime); rc != "" {
		pod.Spec.RuntimeClassName = &rc
	}
	if p.Network == "" || p.Network == sandboxes.NetworkInternal {
		// As on Docker: a sandbox with no route out could still leak data in the names it looks up, so its only
		// resolver is its own loopback.
		pod.Spec.DNSPolicy = corev1.DNSNone
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}}
	} else {
		// The node's resolvers, not the cluster's: a sandbox has no business resolving the cluster's services.
		pod.Spec.DNSPolicy = corev1.DNSDefault
	}
	if !d.cfg.NoWorkspaceChown {
		pod.Spec.InitContainers = []corev1.Container{chownInit(spec.Image, pullPolicy, "workspace", "/workspace",
			corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: cpuLimit, corev1.ResourceMemory: mem},
				Requests: corev1.ResourceList{corev1.ResourceCPU: cpuRequest, corev1.ResourceMemory: mem},
			})}
	}
	return pod, nil
}

func boolPtr(b bool) *bool { return &b }

// chownInit gives a claim's root directory to the sandbox user. Host-path and some other provisioners make it
// root's (0750, or 0777 still root's, which cp -a cannot keep times on), ignoring fsGroup; the sandbox user could
// not use its own workspace. It changes that directory's owner only: root with CHOWN alone, nothing else mounted,
// a read-only root, no tenant code run (the image's own chown).
func chownInit(image string, pull corev1.PullPolicy, volume, path string, res corev1.ResourceRequirements) corev1.Container {
	yes, no := true, false
	root := int64(0)
	return corev1.Container{
		Name: "workspace-owner", Image: image, ImagePullPolicy: pull,
		Command:      []string{"chown", fmt.Sprintf("%d:%d", SandboxUID, SandboxUID), path},
		VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: path}},
		Resources:    res,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: &no,
			Privileged: &no, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// podLabels are the record's labels plus the selector label the NetworkPolicy uses.
func podLabels(spec sandboxes.ContainerSpec) map[string]string {
	l := kubenames.Labels(spec.Labels)
	l[labelContainer] = kubenames.LabelValue(kubenames.Object(spec.Name))
	return l
}

// pvcFor is a workspace's claim. Its storage request is its size limit: the labels' (sandboxes.WorkspaceSizeOf,
// a profile's workspace_size or Bay's size_limit_mb), else the driver's workspace_size.
func (d *Driver) pvcFor(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
	size := d.workspaceSize
	if n := sandboxes.WorkspaceSizeOf(labels); n > 0 {
		size = *resource.NewQuantity(n, resource.BinarySI)
	}
	return d.pvcSized(name, labels, size)
}

// pvcSized is a workspace's claim requesting size.
func (d *Driver) pvcSized(name string, labels map[string]string, size resource.Quantity) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubenames.Object(name), Namespace: d.cfg.Namespace,
			Labels: kubenames.Labels(labels), Annotations: kubenames.Annotations(name, labels),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if d.cfg.StorageClass != "" {
		sc := d.cfg.StorageClass
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}

// privateRanges are what a sandbox with egress (network bridge) may not reach, as the Docker driver's address
// policy has it: the cluster's own networks, the node, link-local (cloud metadata) and the other private ranges.
var privateRanges = []string{
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8", "0.0.0.0/8",
}
var privateRanges6 = []string{"fc00::/7", "fe80::/10", "::1/128"}

// networkPolicyFor isolates one sandbox's Pod: ingress only from the gateway to the agent port; egress only to
// the profile's egress proxy and mirrors given as addresses, plus, for network bridge, the public internet.
func (d *Driver) networkPolicyFor(spec sandboxes.ContainerSpec) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(int32(spec.AgentPort))
	tcp := corev1.ProtocolTCP
	from := []networkingv1.NetworkPolicyPeer{}
	for _, c := range d.cfg.GatewayCIDRs {
		pfx, _ := parseCIDR(c) // validated in ValidateConfig
		from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: pfx.String()}})
	}
	gw := d.cfg.GatewayLabels
	if len(gw) == 0 && len(d.cfg.GatewayCIDRs) == 0 {
		k, v, _ := strings.Cut(DefaultGatewayLabel, "=")
		gw = map[string]string{k: v}
	}
	if len(gw) > 0 {
		from = append(from, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{},
			PodSelector:       &metav1.LabelSelector{MatchLabels: gw},
		})
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubenames.Object(spec.Name), Namespace: d.cfg.Namespace,
			Labels: kubenames.Labels(spec.Labels), Annotations: kubenames.Annotations(spec.Name, spec.Labels),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelContainer: kubenames.LabelValue(kubenames.Object(spec.Name))}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  from,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	p := spec.Profile
	endpoints := []string{p.NPMRegistry, p.PyPIIndexURL, p.AptMirror, p.CRANMirror}
	if p.Egress != nil {
		endpoints = append(endpoints, p.Egress.Proxy)
	}
	for _, ap := range endpointAddrs(endpoints) {
		pp := intstr.FromInt32(int32(ap.Port()))
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(ap.Addr(), ap.Addr().BitLen()).String()}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &pp}},
		})
	}
	if p.Network == sandboxes.NetworkBridge {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: privateRanges}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: privateRanges6}},
		}})
	}
	return np
}

// endpointAddrs are the endpoints (URLs) named by address, with their ports; a host name cannot be a
// NetworkPolicy peer, so such an endpoint stays unreachable under the policy (docs/kubernetes.md).
func endpointAddrs(urls []string) []netip.AddrPort {
	var out []netip.AddrPort
	seen := map[netip.AddrPort]bool{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		a, err := netip.ParseAddr(u.Hostname())
		n, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || n == 0 {
			continue
		}
		ap := netip.AddrPortFrom(a.Unmap(), uint16(n))
		if !seen[ap] {
			seen[ap] = true
			out = append(out, ap)
		}
	}
	return out
}
