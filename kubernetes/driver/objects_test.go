package driver

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// testDriver is a driver on client-go's fakes; in mode agent_sandbox, fakeSandboxController plays the
// agent-sandbox controller.
func testDriver(t *testing.T, cfg Config) (*Driver, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	if cfg.Namespace == "" {
		cfg.Namespace = "sbx"
	}
	var dyn dynamic.Interface
	if cfg.Mode == ModeAgentSandbox {
		dyn = fakeSandboxController(t, cs, cfg.Namespace)
	}
	d, err := NewWithClients(cs, dyn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, cs
}

func testSpec(p sandboxes.Profile) sandboxes.ContainerSpec {
	if p.ID == "" {
		p.ID = "py"
	}
	return sandboxes.ContainerSpec{
		Name: "sg-abc123", Image: "sandgate/sandbox:base", Volume: "sg-ws_Main",
		Env: map[string]string{"B": "2", "A": "1"},
		Labels: map[string]string{"sg.managed": "true", "sg.id": "abc123", "sg.owner": "alice@example.com",
			"sg.created": "2026-11-24T16:00:00Z"},
		Profile: p, Network: "sg-internal", AgentPort: 7777,
	}
}

// TestPodHardening checks the Pod carries the Docker driver's hardening, the profile's resources and the
// Manager's identity, for each kind of profile.
func TestPodHardening(t *testing.T) {
	cases := []struct {
		name     string
		profile  sandboxes.Profile
		cfg      Config
		memory   string
		cpuLimit string
		cpuReq   string
		readOnly bool
		dns      corev1.DNSPolicy
		shm      bool
		runtime  string
		chown    bool
	}{
		{name: "defaults", memory: "1Gi", cpuLimit: "1", cpuReq: "100m", readOnly: true, dns: corev1.DNSNone, chown: true},
		{name: "small internal", profile: sandboxes.Profile{Resources: sandboxes.Resources{CPUs: 0.5, Memory: "256m", Disk: "64m"}},
			memory: "256Mi", cpuLimit: "500m", cpuReq: "100m", readOnly: true, dns: corev1.DNSNone, chown: true},
		{name: "request capped at limit", profile: sandboxes.Profile{Resources: sandboxes.Resources{CPUs: 0.05}},
			memory: "1Gi", cpuLimit: "50m", cpuReq: "50m", readOnly: true, dns: corev1.DNSNone, chown: true},
		{name: "bridge browser writable runsc", cfg: Config{NoWorkspaceChown: true, ImagePullPolicy: "Never"},
			profile: sandboxes.Profile{Network: sandboxes.NetworkBridge, WritableRoot: true, Runtime: sandboxes.RuntimeGVisor,
				Capabilities: []string{sandboxes.CapBrowser}},
			memory: "1Gi", cpuLimit: "1", cpuReq: "100m", readOnly: false, dns: corev1.DNSDefault, shm: true, runtime: "gvisor"},
		{name: "runsc with its class configured", cfg: Config{RuntimeClasses: map[string]string{"runsc": "gvisor-kvm"}},
			profile: sandboxes.Profile{Runtime: sandboxes.RuntimeGVisor},
			memory:  "1Gi", cpuLimit: "1", cpuReq: "100m", readOnly: true, dns: corev1.DNSNone, chown: true, runtime: "gvisor-kvm"},
		{name: "another runtime is its own class", profile: sandboxes.Profile{Runtime: "kata"},
			memory: "1Gi", cpuLimit: "1", cpuReq: "100m", readOnly: true, dns: corev1.DNSNone, chown: true, runtime: "kata"},
		{name: "another runtime mapped", cfg: Config{RuntimeClasses: map[string]string{"kata": "kata-qemu"}},
			profile: sandboxes.Profile{Runtime: "kata"},
			memory:  "1Gi", cpuLimit: "1", cpuReq: "100m", readOnly: true, dns: corev1.DNSNone, chown: true, runtime: "kata-qemu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := testDriver(t, tc.cfg)
			pod, err := d.podFor(testSpec(tc.profile))
			if err != nil {
				t.Fatal(err)
			}
			s := pod.Spec
			if s.RestartPolicy != corev1.RestartPolicyNever || *s.AutomountServiceAccountToken || *s.EnableServiceLinks ||
				!*s.ShareProcessNamespace || s.HostNetwork || s.HostPID || s.HostIPC {
				t.Errorf("pod-level settings: %+v", s)
			}
			if psc := s.SecurityContext; *psc.RunAsUser != SandboxUID || !*psc.RunAsNonRoot || *psc.FSGroup != SandboxUID ||
				psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context: %+v", psc)
			}
			if len(s.Containers) != 1 {
				t.Fatalf("containers: %d", len(s.Containers))
			}
			c := s.Containers[0]
			sc := c.SecurityContext
			if *sc.RunAsUser != SandboxUID || !*sc.RunAsNonRoot || *sc.Privileged || *sc.AllowPrivilegeEscalation ||
				len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
				sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("container security context: %+v", sc)
			}
			if *sc.ReadOnlyRootFilesystem != tc.readOnly {
				t.Errorf("read-only root %v, want %v", *sc.ReadOnlyRootFilesystem, tc.readOnly)
			}
			lim, req := c.Resources.Limits, c.Resources.Requests
			if lim.Memory().String() != tc.memory || req.Memory().String() != tc.memory {
				t.Errorf("memory limit %s request %s, want both %s", lim.Memory(), req.Memory(), tc.memory)
			}
			if lim.Cpu().String() != tc.cpuLimit || req.Cpu().String() != tc.cpuReq {
				t.Errorf("cpu limit %s request %s, want %s and %s", lim.Cpu(), req.Cpu(), tc.cpuLimit, tc.cpuReq)
			}
			if c.Image != "sandgate/sandbox:base" || len(c.Command) != 0 || len(c.Args) != 0 {
				t.Errorf("image %s command %v args %v: the image's own entrypoint (our agent) must run", c.Image, c.Command, c.Args)
			}
			if len(c.Env) != 2 || c.Env[0].Name != "A" || c.Env[1].Value != "2" {
				t.Errorf("env: %v", c.Env)
			}
			if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 7777 {
				t.Errorf("ports: %v", c.Ports)
			}
			if s.DNSPolicy != tc.dns {
				t.Errorf("dns policy %s, want %s", s.DNSPolicy, tc.dns)
			}
			mounts := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m.Name
			}
			if mounts["/workspace"] != "workspace" || mounts["/tmp"] == "" || mounts[sandboxes.SandboxHome] == "" {
				t.Errorf("mounts: %v", mounts)
			}
			if (mounts["/dev/shm"] != "") != tc.shm {
				t.Errorf("shm mount %q, want %v", mounts["/dev/shm"], tc.shm)
			}
			for _, v := range s.Volumes {
				switch {
				case v.PersistentVolumeClaim != nil:
					if v.PersistentVolumeClaim.ClaimName != kubenames.Object("sg-ws_Main") {
						t.Errorf("claim %s", v.PersistentVolumeClaim.ClaimName)
					}
				case v.EmptyDir != nil:
					if v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil {
						t.Errorf("scratch volume %s is not sized tmpfs: %+v", v.Name, v.EmptyDir)
					}
				default:
					t.Errorf("unexpected volume %+v", v)
				}
			}
			if got := ""; s.RuntimeClassName != nil {
				got = *s.RuntimeClassName
				if got != tc.runtime {
					t.Errorf("runtime class %q, want %q", got, tc.runtime)
				}
			} else if tc.runtime != "" {
				t.Errorf("no runtime class, want %q", tc.runtime)
			}
			if (len(s.InitContainers) == 1) != tc.chown {
				t.Fatalf("init containers %d, want chown %v", len(s.InitContainers), tc.chown)
			}
			if tc.chown {
				ic := s.InitContainers[0]
				if caps := ic.SecurityContext.Capabilities; len(caps.Add) != 1 || caps.Add[0] != "CHOWN" || caps.Drop[0] != "ALL" ||
					*ic.SecurityContext.AllowPrivilegeEscalation || !*ic.SecurityContext.ReadOnlyRootFilesystem || len(ic.VolumeMounts) != 1 {
					t.Errorf("workspace-owner init container is not minimal: %+v", ic)
				}
			}
			if tc.cfg.ImagePullPolicy != "" && c.ImagePullPolicy != corev1.PullPolicy(tc.cfg.ImagePullPolicy) {
				t.Errorf("pull policy %s", c.ImagePullPolicy)
			}
			// Identity: labels valid for Kubernetes, exact values in the annotation.
			if pod.Labels["sg.id"] != "abc123" || pod.Labels["sg.managed"] != "true" || !strings.HasPrefix(pod.Labels["sg.owner"], "h-") ||
				pod.Labels[kubenames.LabelManagedBy] != kubenames.ManagedBy || pod.Labels[labelContainer] != "sg-abc123" {
				t.Errorf("labels: %v", pod.Labels)
			}
			exact := kubenames.ExactLabels(pod.Annotations)
			if exact["sg.owner"] != "alice@example.com" || exact["sg.created"] != "2026-11-24T16:00:00Z" {
				t.Errorf("exact labels: %v", exact)
			}
			for k, v := range pod.Labels {
				if !kubenames.ValidLabelKey(k) || !kubenames.ValidLabelValue(v) {
					t.Errorf("invalid label %s=%s", k, v)
				}
			}
		})
	}
}

// TestUnsupportedFeatures checks what a Pod cannot be is refused with the typed capability error before anything
// is made.
func TestUnsupportedFeatures(t *testing.T) {
	cases := map[string]func(*sandboxes.ContainerSpec){
		"network none":  func(s *sandboxes.ContainerSpec) { s.Profile.Network = sandboxes.NetworkNone },
		"socket dir":    func(s *sandboxes.ContainerSpec) { s.AgentSocketDir = "/run/x" },
		"named network": func(s *sandboxes.ContainerSpec) { s.Profile.Network = "corp-net" },
		"host binds":    func(s *sandboxes.ContainerSpec) { s.HostBinds = []string{"/etc:/host-etc:ro"} },
		"inject agent":  func(s *sandboxes.ContainerSpec) { s.AgentImage = "sandgate/sandbox:base" },
		"host port":     func(s *sandboxes.ContainerSpec) { s.Profile.ConnectMode = sandboxes.ConnectHostPort },
		"user":          func(s *sandboxes.ContainerSpec) { s.Profile.User = &sandboxes.SandboxUser{Name: "shipyard", UID: 1000} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			d, cs := testDriver(t, Config{})
			spec := testSpec(sandboxes.Profile{})
			mutate(&spec)
			_, err := d.Create(t.Context(), spec)
			var se *sandboxes.Error
			if !errors.As(err, &se) || se.Code != sandboxes.CodeCapabilityAbsent {
				t.Fatalf("want a capability error, got %v", err)
			}
			if n := len(cs.Actions()); n != 0 {
				t.Errorf("%d API calls made for a refused spec", n)
			}
		})
	}
	t.Run("bad memory", func(t *testing.T) {
		d, _ := testDriver(t, Config{})
		if _, err := d.podFor(testSpec(sandboxes.Profile{Resources: sandboxes.Resources{Memory: "lots"}})); err == nil {
			t.Fatal("bad memory accepted")
		}
	})
}

// TestNetworkPolicy checks a sandbox admits only the gateway, to the agent port, and reaches only what its
// profile allows.
func TestNetworkPolicy(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		profile  sandboxes.Profile
		from     int // ingress peers
		cidrFrom string
		egress   []string // egress rule peers' CIDRs, in order
	}{
		{name: "internal, default gateway selector", from: 1},
		{name: "gateway cidrs", cfg: Config{GatewayCIDRs: []string{"10.1.0.0/16", "192.168.5.9"}}, from: 2, cidrFrom: "192.168.5.9/32"},
		{name: "internal with proxy and a named mirror", profile: sandboxes.Profile{Egress: &sandboxes.Egress{Proxy: "http://10.9.8.7:3128"},
			NPMRegistry: "https://npm.corp.example/"}, from: 1, egress: []string{"10.9.8.7/32"}},
		{name: "bridge", profile: sandboxes.Profile{Network: sandboxes.NetworkBridge}, from: 1, egress: []string{"0.0.0.0/0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := testDriver(t, tc.cfg)
			np := d.networkPolicyFor(testSpec(tc.profile))
			s := np.Spec
			if s.PodSelector.MatchLabels[labelContainer] != "sg-abc123" || len(s.PolicyTypes) != 2 {
				t.Fatalf("selector/types: %+v", s)
			}
			if len(s.Ingress) != 1 || len(s.Ingress[0].Ports) != 1 || s.Ingress[0].Ports[0].Port.IntValue() != 7777 {
				t.Fatalf("ingress: %+v", s.Ingress)
			}
			if len(s.Ingress[0].From) != tc.from {
				t.Errorf("ingress peers %d, want %d", len(s.Ingress[0].From), tc.from)
			}
			if tc.cidrFrom != "" && s.Ingress[0].From[1].IPBlock.CIDR != tc.cidrFrom {
				t.Errorf("ingress cidr %s", s.Ingress[0].From[1].IPBlock.CIDR)
			}
			if tc.cidrFrom == "" && s.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "sandgate-gateway" {
				t.Errorf("default gateway selector: %+v", s.Ingress[0].From[0])
			}
			if len(s.Egress) != len(tc.egress) {
				t.Fatalf("egress rules %+v, want %v", s.Egress, tc.egress)
			}
			for i, cidr := range tc.egress {
				if got := s.Egress[i].To[0].IPBlock.CIDR; got != cidr {
					t.Errorf("egress %d: %s, want %s", i, got, cidr)
				}
			}
			if tc.profile.Network == sandboxes.NetworkBridge {
				except := strings.Join(s.Egress[0].To[0].IPBlock.Except, ",")
				for _, must := range []string{"10.0.0.0/8", "169.254.0.0/16", "192.168.0.0/16"} {
					if !strings.Contains(except, must) {
						t.Errorf("bridge egress reaches %s: %s", must, except)
					}
				}
			}
		})
	}
}

func TestWorkspaceClaim(t *testing.T) {
	d, _ := testDriver(t, Config{StorageClass: "fast", WorkspaceSize: "5Gi"})
	pvc := d.pvcFor("sg-Work_Space", map[string]string{"sg.workspace": "Work Space"})
	if *pvc.Spec.StorageClassName != "fast" || pvc.Spec.Resources.Requests.Storage().String() != "5Gi" ||
		pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("claim spec: %+v", pvc.Spec)
	}
	if pvc.Name == "sg-Work_Space" || len(kubenames.Validate(pvc.Name)) != 0 || pvc.Annotations[kubenames.AnnoName] != "sg-Work_Space" {
		t.Errorf("claim name %s / annotation %v", pvc.Name, pvc.Annotations)
	}
	d2, _ := testDriver(t, Config{})
	if pvc := d2.pvcFor("sg-x", nil); pvc.Spec.StorageClassName != nil || pvc.Spec.Resources.Requests.Storage().String() != DefaultWorkspaceSize {
		t.Errorf("default claim: %+v", pvc.Spec)
	}
}

// TestWorkspaceClaimSize: a workspace's size limit (the volume labels' workspace_size: a profile's, Bay's
// size_limit_mb) is its claim's storage request, and a copy's claim gets its source's request.
func TestWorkspaceClaimSize(t *testing.T) {
	d, _ := testDriver(t, Config{WorkspaceSize: "5Gi"})
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"no size: the driver's", map[string]string{"sg.workspace": "w"}, "5Gi"},
		{"profile size", map[string]string{"sg.workspace_size": "67108864"}, "64Mi"},
		{"bay cargo", map[string]string{"sg.workspace_size": "1073741824"}, "1Gi"},
		{"unparsable: the driver's", map[string]string{"sg.workspace_size": "lots"}, "5Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.pvcFor("sg-x", tc.labels).Spec.Resources.Requests.Storage().String(); got != tc.want {
				t.Errorf("request %s, want %s", got, tc.want)
			}
		})
	}
	src := d.pvcFor("sg-src", map[string]string{"sg.workspace_size": "67108864"})
	if got := d.copyClaimFor(src, "sg-copy", map[string]string{"sg.snapshot": "s"}).Spec.Resources.Requests.Storage().String(); got != "64Mi" {
		t.Errorf("a copy's claim requests %s, want its source's 64Mi", got)
	}
	if got := d.copyClaimFor(src, "sg-copy", map[string]string{"sg.workspace_size": "134217728"}).Spec.Resources.Requests.Storage().String(); got != "128Mi" {
		t.Errorf("a copy with its own size requests %s, want 128Mi", got)
	}
}

func TestValidateConfig(t *testing.T) {
	bad := map[string]Config{
		"namespace":     {Namespace: "Not_A_Namespace"},
		"size":          {WorkspaceSize: "lots"},
		"zero size":     {WorkspaceSize: "0"},
		"cpu":           {CPURequest: "-1"},
		"pull policy":   {ImagePullPolicy: "Sometimes"},
		"cidr":          {GatewayCIDRs: []string{"10.0.0.0/33"}},
		"labels":        {GatewayLabels: map[string]string{"app": "not valid!"}},
		"mode":          {Mode: "crd"},
		"runtime class": {RuntimeClasses: map[string]string{"runsc": "Not A Class"}},
		"empty class":   {RuntimeClasses: map[string]string{"runsc": ""}},
		"empty runtime": {RuntimeClasses: map[string]string{"": "gvisor"}},
	}
	for name, cfg := range bad {
		if err := ValidateConfig(cfg); err == nil {
			t.Errorf("%s: accepted %+v", name, cfg)
		}
	}
	if err := ValidateConfig(Config{Mode: ModeAgentSandbox, Namespace: "ok", WorkspaceSize: "2Gi", CPURequest: "250m", ImagePullPolicy: "Never",
		GatewayCIDRs: []string{"10.0.0.1", "fd00::/8"}, GatewayLabels: map[string]string{"app": "gw"},
		RuntimeClasses: map[string]string{"runsc": "gvisor-kvm"}}); err != nil {
		t.Errorf("good config refused: %v", err)
	}
}

// TestPodHostAliases: a profile's host aliases (Ship's `ship`) name the sandbox itself in the Pod's hosts file.
func TestPodHostAliases(t *testing.T) {
	d, _ := testDriver(t, Config{})
	pod, err := d.podFor(testSpec(sandboxes.Profile{HostAliases: []string{"ship"}}))
	if err != nil {
		t.Fatal(err)
	}
	if h := pod.Spec.HostAliases; len(h) != 1 || h[0].IP != "127.0.0.1" || len(h[0].Hostnames) != 1 || h[0].Hostnames[0] != "ship" {
		t.Errorf("host aliases: %+v", h)
	}
	if pod, _ := d.podFor(testSpec(sandboxes.Profile{})); len(pod.Spec.HostAliases) != 0 {
		t.Errorf("host aliases without the option: %+v", pod.Spec.HostAliases)
	}
}
