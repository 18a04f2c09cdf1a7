package bayapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
)

// BayEnv is what a Bay deployment configures through BAY_* environment variables (pydantic-settings with `__`
// nesting: BAY_SECURITY__API_KEY is security.api_key). AstrBot's auto-start and its plugin set these on the Bay
// container; the gateway honours them so it can be dropped in for Bay's image.
type BayEnv struct {
	// APIKey is BAY_API_KEY, else BAY_SECURITY__API_KEY.
	APIKey string
	// AllowAnonymous is BAY_SECURITY__ALLOW_ANONYMOUS when set.
	AllowAnonymous *bool
	// DataDir is BAY_DATA_DIR (where credentials.json goes).
	DataDir string
	// Host and Port are BAY_SERVER__HOST / BAY_SERVER__PORT (they name the endpoint in credentials.json).
	Host string
	Port int
	// Profiles is BAY_PROFILES (a JSON list of Bay profiles) translated to sandgate profiles.
	Profiles []sandboxes.Profile
	// DockerNetwork is BAY_DRIVER__DOCKER__NETWORK: profiles from BAY_PROFILES without a network get it.
	DockerNetwork string
	// Tree is every BAY_* variable as the nested document pydantic-settings would build (values parsed as JSON
	// when they are JSON), for settings this struct does not name.
	Tree map[string]any
}

// Endpoint is credentials.json's endpoint: http://{server.host}:{server.port}, Bay's defaults 0.0.0.0:8114.
func (e BayEnv) Endpoint() string {
	host, port := e.Host, e.Port
	if host == "" {
		host = "0.0.0.0"
	}
	if port == 0 {
		port = 8114
	}
	return fmt.Sprintf("http://%s:%d", host, port)
}

// ReadBayEnv reads BAY_* variables from environ (os.Environ() form).
func ReadBayEnv(environ []string) (BayEnv, error) {
	var e BayEnv
	e.Tree = map[string]any{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "BAY_") {
			continue
		}
		parts := strings.Split(strings.ToLower(strings.TrimPrefix(k, "BAY_")), "__")
		node := e.Tree
		for _, p := range parts[:len(parts)-1] {
			child, ok := node[p].(map[string]any)
			if !ok {
				child = map[string]any{}
				node[p] = child
			}
			node = child
		}
		node[parts[len(parts)-1]] = envValue(v)
	}
	get := func(path ...string) (any, bool) {
		var cur any = e.Tree
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[p]; !ok {
				return nil, false
			}
		}
		return cur, true
	}
	str := func(path ...string) string {
		v, ok := get(path...)
		if !ok {
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	e.APIKey = str("api_key")
	if e.APIKey == "" {
		e.APIKey = str("security", "api_key")
	}
	if v, ok := get("security", "allow_anonymous"); ok {
		b, err := asBool(v)
		if err != nil {
			return e, fmt.Errorf("BAY_SECURITY__ALLOW_ANONYMOUS: %w", err)
		}
		e.AllowAnonymous = &b
	}
	e.DataDir = str("data_dir")
	e.Host = str("server", "host")
	if p := str("server", "port"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return e, fmt.Errorf("BAY_SERVER__PORT: %q is not a port", p)
		}
		e.Port = n
	}
	e.DockerNetwork = str("driver", "docker", "network")
	if raw := lookup(environ, "BAY_PROFILES"); raw != "" {
		profiles, err := ParseBayProfiles([]byte(raw))
		if err != nil {
			return e, fmt.Errorf("BAY_PROFILES: %w", err)
		}
		for i := range profiles {
			if profiles[i].Network == "" && e.DockerNetwork != "" {
				profiles[i].Network = e.DockerNetwork
			}
		}
		e.Profiles = profiles
	}
	return e, nil
}

func lookup(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// envValue parses JSON lists, objects, numbers and booleans as pydantic-settings does for complex fields; anything
// else stays a string.
func envValue(v string) any {
	t := strings.TrimSpace(v)
	if t != "" && (t[0] == '[' || t[0] == '{') {
		var out any
		if json.Unmarshal([]byte(t), &out) == nil {
			return out
		}
	}
	return v
}

func asBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "1", "true", "yes", "on", "y", "t":
			return true, nil
		case "0", "false", "no", "off", "n", "f", "":
			return false, nil
		}
	}
	return false, fmt.Errorf("%v is not a boolean", v)
}

// bayProfile is Bay's profile schema (pkgs/bay/app/config.py), single- and multi-container forms.
type bayProfile struct {
	ID           string              `json:"id"`
	Description  string              `json:"description"`
	Image        string              `json:"image"`
	RuntimeType  string              `json:"runtime_type"`
	Resources    sandboxes.Resources `json:"resources"`
	Capabilities []string            `json:"capabilities"`
	Env          map[string]string   `json:"env"`
	Containers   []struct {
		Name         string              `json:"name"`
		Image        string              `json:"image"`
		RuntimeType  string              `json:"runtime_type"`
		Resources    sandboxes.Resources `json:"resources"`
		Capabilities []string            `json:"capabilities"`
		Env          map[string]string   `json:"env"`
	} `json:"containers"`
	IdleTimeout  *sandboxes.Duration `json:"idle_timeout"`
	WarmPoolSize int                 `json:"warm_pool_size"`
	Browser      *string             `json:"browser"`
	// sandgate fields a BAY_PROFILES document may carry too.
	Network     string `json:"network"`
	ConnectMode string `json:"connect_mode"`
	Runtime     string `json:"runtime"`
	AppPort     int    `json:"app_port"`
	// Ship's conventions (sandboxes/profile_ship.go): a profile that wants Ship's user, HOME, env file and `ship`
	// name asks for them; Bay's own fields never imply the user, HOME or env file.
	User        *sandboxes.SandboxUser `json:"user"`
	Home        string                 `json:"home"`
	EnvFile     string                 `json:"env_file"`
	HostAliases []string               `json:"host_aliases"`
}

// Images the translated profiles run. Bay's runtime images (Ship, Gull) cannot serve sandgate, so a profile naming
// one gets ours: the browser image when the profile has the browser capability.
const (
	SandgateBaseImage    = "sandgate/sandbox:base"
	SandgateBrowserImage = "sandgate/sandbox:browser"
)

func isBayRuntimeImage(img string) bool {
	i := strings.ToLower(img)
	name := i
	if at := strings.LastIndex(name, "/"); at >= 0 {
		name = name[at+1:]
	}
	name, _, _ = strings.Cut(name, ":")
	return strings.Contains(i, "shipyard-neo-ship") || strings.Contains(i, "shipyard-neo-gull") || name == "ship" || name == "gull" || name == "shipyard-ship"
}

// ParseBayProfiles translates a JSON list of Bay profiles into sandgate profiles. A multi-container profile becomes
// one sandgate sandbox (our one agent serves every capability): capabilities are the union, the first Ship
// container gives resources and env. Bay's default idle_timeout (1800 s) applies when none is given.
func ParseBayProfiles(raw []byte) ([]sandboxes.Profile, error) {
	var in []bayProfile
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("not a JSON list of profiles: %w", err)
	}
	out := make([]sandboxes.Profile, 0, len(in))
	for i, bp := range in {
		p := sandboxes.Profile{
			ID: bp.ID, Description: bp.Description, Image: bp.Image, Resources: bp.Resources, Env: bp.Env,
			WarmPoolSize: bp.WarmPoolSize, Network: bp.Network, ConnectMode: bp.ConnectMode, Runtime: bp.Runtime, AppPort: bp.AppPort,
			User: bp.User, Home: bp.Home, EnvFile: bp.EnvFile, HostAliases: bp.HostAliases,
		}
		caps := slices.Clone(bp.Capabilities)
		for ci, c := range bp.Containers {
			caps = append(caps, c.Capabilities...)
			if c.RuntimeType == "gull" {
				caps = append(caps, sandboxes.CapBrowser)
			}
			if (ci == 0 || c.RuntimeType == "ship") && p.Image == "" {
				p.Image = c.Image
				if p.Resources == (sandboxes.Resources{}) {
					p.Resources = c.Resources
				}
				for k, v := range c.Env {
					if p.Env == nil {
						p.Env = map[string]string{}
					}
					p.Env[k] = v
				}
			}
		}
		if bp.Browser != nil && *bp.Browser != "" {
			caps = append(caps, sandboxes.CapBrowser)
		}
		// In Bay, the containers of a multi-container profile reach each other by their names (Gull opens
		// http://ship:9000). Ours are one sandbox, so each name is an alias of the sandbox itself.
		if len(bp.Containers) > 1 {
			for _, c := range bp.Containers {
				if sandboxes.ValidHostAlias(c.Name) && !slices.Contains(p.HostAliases, c.Name) {
					p.HostAliases = append(p.HostAliases, c.Name)
				}
			}
		}
		if len(caps) == 0 {
			caps = []string{sandboxes.CapFilesystem, sandboxes.CapShell, sandboxes.CapPython}
		}
		// Bay's "filesystem/shell/python" plus anything unknown to sandgate (e.g. Ship's "ipython") is normalised.
		p.Capabilities = nil
		for _, c := range caps {
			if c == "ipython" {
				c = sandboxes.CapPython
			}
			if c == "terminal" {
				c = sandboxes.CapShell
			}
			if !slices.Contains(p.Capabilities, c) {
				p.Capabilities = append(p.Capabilities, c)
			}
		}
		if p.Image == "" || isBayRuntimeImage(p.Image) {
			p.Image = SandgateBaseImage
			if slices.Contains(p.Capabilities, sandboxes.CapBrowser) {
				p.Image = SandgateBrowserImage
			}
		}
		if bp.IdleTimeout != nil {
			p.IdleTimeout = *bp.IdleTimeout
		} else {
			p.IdleTimeout, _ = sandboxes.ParseDuration("1800")
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("profile %d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ProfilesFor is what a gateway configured with the profiles configured runs under this Bay environment, so
// AstrBot's auto-start mode can run our image in place of Bay's: BAY_PROFILES replace or add profiles (environment
// over configuration, as in Bay), and a gateway with no profile at all gets Bay's python-default.
func (e BayEnv) ProfilesFor(configured []sandboxes.Profile) []sandboxes.Profile {
	out := mergeProfiles(configured, e.Profiles)
	if len(out) == 0 {
		out = []sandboxes.Profile{PythonDefault()}
	}
	return out
}

// PythonDefault is Bay's default profile as sandgate runs it: Python with a shell and files on our base image,
// stopped after 30 idle minutes (Bay's idle_timeout 1800).
func PythonDefault() sandboxes.Profile {
	return sandboxes.Profile{
		ID: DefaultProfile, Description: "Bay's default: Python with a shell and files", Image: SandgateBaseImage,
		Resources:    sandboxes.Resources{CPUs: 1, Memory: "1g"},
		Capabilities: []string{sandboxes.CapFilesystem, sandboxes.CapShell, sandboxes.CapPython},
		IdleTimeout:  sandboxes.Duration(1800 * time.Second),
	}
}

// mergeProfiles returns base with env's profiles added; a profile of env replaces one of base with the same id
// (environment overrides configuration, as in Bay).
func mergeProfiles(base, env []sandboxes.Profile) []sandboxes.Profile {
	out := slices.Clone(base)
	for _, p := range env {
		if i := slices.IndexFunc(out, func(q sandboxes.Profile) bool { return q.ID == p.ID }); i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out
}

// ResolveDataDir picks where credentials.json lives (and an old bayapi.db is imported from): BAY_DATA_DIR, else the configured dir, else
// the fallback (Caddy's data dir + "/sandgate").
func ResolveDataDir(env BayEnv, configured, fallback string) (string, error) {
	d := env.DataDir
	if d == "" {
		d = configured
	}
	if d == "" {
		d = fallback
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("resolving the data dir %q: %w", d, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("creating the data dir: %w", err)
	}
	return abs, nil
}
