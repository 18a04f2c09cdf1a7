package e2b

// E2B's JSON shapes (e2b-dev/infra spec/openapi.yml), as far as this dialect reads or answers them.

// NewSandbox is the create body of POST /v2/sandboxes and POST /sandboxes.
type NewSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *NetworkConfig    `json:"network,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume,omitempty"`
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
	Secure       *bool         `json:"secure,omitempty"`
	MCP          any           `json:"mcp,omitempty"`
	IAM          any           `json:"iam,omitempty"`
}

// NetworkConfig is SandboxNetworkConfig.
type NetworkConfig struct {
	AllowOut           []string       `json:"allowOut,omitempty"`
	DenyOut            []string       `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool          `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    *string        `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int          `json:"httpsPorts,omitempty"`
	Rules              map[string]any `json:"rules,omitempty"`
	EgressProxy        any            `json:"egressProxy,omitempty"`
}

// VolumeMount is SandboxVolumeMount.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Sandbox is the answer of create, connect and each fork.
type Sandbox struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// ListedSandbox is one item of the lists.
type ListedSandbox struct {
	SandboxID    string            `json:"sandboxID"`
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	ClientID     string            `json:"clientID"`
	StartedAt    string            `json:"startedAt"`
	EndAt        string            `json:"endAt"`
	State        string            `json:"state"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	EnvdVersion  string            `json:"envdVersion"`
	Metadata     map[string]string `json:"metadata"`
	VolumeMounts []VolumeMount     `json:"volumeMounts"`
}

// SandboxDetail is GET /sandboxes/{id}.
type SandboxDetail struct {
	ListedSandbox
	EnvdAccessToken     string         `json:"envdAccessToken,omitempty"`
	Domain              *string        `json:"domain"`
	AllowInternetAccess *bool          `json:"allowInternetAccess,omitempty"`
	Network             *NetworkConfig `json:"network,omitempty"`
	Lifecycle           Lifecycle      `json:"lifecycle"`
}

// Lifecycle is SandboxLifecycle: what happens at the timeout.
type Lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// SandboxMetric is one sample of GET /sandboxes/{id}/metrics.
type SandboxMetric struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       uint64  `json:"memUsed"`
	MemTotal      uint64  `json:"memTotal"`
	MemCache      uint64  `json:"memCache"`
	DiskUsed      uint64  `json:"diskUsed"`
	DiskTotal     uint64  `json:"diskTotal"`
}

// SnapshotInfo is the answer of a snapshot create and one item of GET /snapshots.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// ForkItem is one item of a fork's answer.
type ForkItem struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}
