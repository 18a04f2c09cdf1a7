package sandboxes

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// What users put in a sandbox beyond its image: commands run at start, supervised services, packages installed
// before the sandbox is ready, package mirrors and an outbound proxy. The agent does the work; the Manager passes
// the profile's settings to it as environment (CustomiseEnv).

// The agent's names for the customisation it reads from the environment. agentapi is their one definition; these
// aliases let a dialect that passes a create's dependencies or services to the Manager name them through the core.
const (
	EnvInit         = agentapi.EnvInit
	EnvServices     = agentapi.EnvServices
	EnvDependencies = agentapi.EnvDependencies
	EnvMirrors      = agentapi.EnvMirrors
)

// Service is a long-running process the agent supervises (agentapi's wire type).
type Service = agentapi.ServiceSpec

// Dependencies are packages the agent installs at start (agentapi's wire type, which also validates them).
type Dependencies = agentapi.Dependencies

// Egress is how a sandbox reaches outside: Proxy becomes HTTP_PROXY/HTTPS_PROXY (and their lowercase forms),
// NoProxy NO_PROXY. Allow is the host allow-list sandgate's own proxy (http.handlers.sandbox_egress) applies to
// this profile's sandboxes: names, *.domains, addresses or CIDR prefixes; private addresses only when named.
type Egress struct {
	Proxy   string   `json:"proxy,omitempty"`
	NoProxy []string `json:"no_proxy,omitempty"`
	Allow   []string `json:"allow,omitempty"`
}

var (
	serviceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	noProxyItem = regexp.MustCompile(`^[A-Za-z0-9.*:/\[\]_-]{1,253}$`)
)

// mergeDependencies returns d with other's packages added (other wins on the same name), for a create's
// dependencies on top of its profile's.
func mergeDependencies(d, other *agentapi.Dependencies) *agentapi.Dependencies {
	if d == nil && other == nil {
		return nil
	}
	out := &agentapi.Dependencies{Python: map[string]string{}, Node: map[string]string{}, R: map[string]string{}}
	for _, src := range []*agentapi.Dependencies{d, other} {
		if src == nil {
			continue
		}
		for k, v := range src.Python {
			out.Python[k] = v
		}
		for k, v := range src.Node {
			out.Node[k] = v
		}
		for k, v := range src.R {
			out.R[k] = v
		}
		for _, a := range src.Apt {
			if !slices.Contains(out.Apt, a) {
				out.Apt = append(out.Apt, a)
			}
		}
	}
	return out
}

var allowName = regexp.MustCompile(`^(\*\.)?([a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}$`)

func validAllowEntry(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return len(s) <= 253 && allowName.MatchString(strings.ToLower(s))
}

func validHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && !strings.ContainsAny(s, "\"\n\r \t")
}

// validateCustomise checks the customisation fields of p.
func (p *Profile) validateCustomise() error {
	for i, c := range p.Init {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("profile %q: init command %d is empty", p.ID, i)
		}
	}
	seen := map[string]bool{}
	for _, s := range p.Services {
		switch {
		case !serviceName.MatchString(s.Name):
			return fmt.Errorf("profile %q: service name %q must be lowercase letters, digits, '_' or '-' (at most 32)", p.ID, s.Name)
		case seen[s.Name]:
			return fmt.Errorf("profile %q: service %q declared twice", p.ID, s.Name)
		case strings.TrimSpace(s.Command) == "":
			return fmt.Errorf("profile %q: service %q has no command", p.ID, s.Name)
		case s.Port < 0 || s.Port > 65535:
			return fmt.Errorf("profile %q: service %q port %d is not a port", p.ID, s.Name, s.Port)
		case s.Restart != "" && s.Restart != agentapi.RestartAlways && s.Restart != agentapi.RestartOnFailure && s.Restart != agentapi.RestartNever:
			return fmt.Errorf("profile %q: service %q restart must be always, on-failure or never", p.ID, s.Name)
		}
		seen[s.Name] = true
	}
	if p.Dependencies != nil {
		// The agent's own patterns: the API refuses early, the agent checks again before installing.
		if err := p.Dependencies.Validate(); err != nil {
			return fmt.Errorf("profile %q: %w", p.ID, err)
		}
	}
	for name, v := range map[string]string{"npm_registry": p.NPMRegistry, "pypi_index_url": p.PyPIIndexURL, "apt_mirror": p.AptMirror, "cran_mirror": p.CRANMirror} {
		if v != "" && !validHTTPURL(v) {
			return fmt.Errorf("profile %q: %s %q is not an http(s) URL", p.ID, name, v)
		}
	}
	if p.Egress != nil {
		if p.Egress.Proxy != "" && !validHTTPURL(p.Egress.Proxy) {
			return fmt.Errorf("profile %q: egress proxy %q is not an http(s) URL", p.ID, p.Egress.Proxy)
		}
		for _, a := range p.Egress.Allow {
			if !validAllowEntry(a) {
				return fmt.Errorf("profile %q: egress allow entry %q is not a host name, *.domain, address or CIDR prefix", p.ID, a)
			}
		}
		for _, n := range p.Egress.NoProxy {
			if !noProxyItem.MatchString(n) {
				return fmt.Errorf("profile %q: egress no_proxy entry %q is not a host, domain or CIDR", p.ID, n)
			}
		}
	}
	return nil
}

// AppTarget is the port /app routes to: AppPort when set, else the first service that declares a port.
func (p *Profile) AppTarget() int {
	if p.AppPort != 0 {
		return p.AppPort
	}
	for _, s := range p.Services {
		if s.Port != 0 {
			return s.Port
		}
	}
	return 0
}

// requestDependencies reads a create request's dependencies from its environment (EnvDependencies as JSON, the
// way the API passes them to the Manager); nil when absent.
func requestDependencies(requestEnv map[string]string) (*agentapi.Dependencies, error) {
	raw, ok := requestEnv[agentapi.EnvDependencies]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var d agentapi.Dependencies
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// CustomiseEnv is the environment that hands p's customisation to the agent. The create request's environment
// wins over the profile's settings, except dependencies, which are merged (the request's over the profile's).
func (p *Profile) CustomiseEnv(requestEnv map[string]string) map[string]string {
	env := map[string]string{}
	put := func(name string, v any) {
		b, _ := json.Marshal(v) // plain data always marshals
		env[name] = string(b)
	}
	// A request's malformed dependencies are left as they are: the agent refuses them and the sandbox fails with
	// that message, instead of the packages being dropped silently.
	extra, depsErr := requestDependencies(requestEnv)
	defer func() {
		for k := range requestEnv {
			if k != agentapi.EnvDependencies || depsErr != nil {
				delete(env, k)
			}
		}
	}()
	if len(p.Init) > 0 {
		put(agentapi.EnvInit, p.Init)
	}
	if len(p.Services) > 0 {
		put(agentapi.EnvServices, p.Services)
	}
	if deps := mergeDependencies(p.Dependencies, extra); depsErr == nil && deps != nil && (len(deps.Python)+len(deps.Node)+len(deps.R)+len(deps.Apt) > 0) {
		put(agentapi.EnvDependencies, deps)
	}
	// Fields left empty are omitted (omitempty): an older agent refuses fields it does not know, such as cran_mirror.
	if m := (agentapi.Mirrors{NPMRegistry: p.NPMRegistry, PyPIIndexURL: p.PyPIIndexURL, AptMirror: p.AptMirror, CRANMirror: p.CRANMirror}); m != (agentapi.Mirrors{}) {
		put(agentapi.EnvMirrors, m)
	}
	if p.Egress != nil && p.Egress.Proxy != "" {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = p.Egress.Proxy
		}
		noProxy := append([]string{"localhost", "127.0.0.1", "::1"}, p.Egress.NoProxy...)
		sort.Strings(noProxy[3:])
		env["NO_PROXY"] = strings.Join(noProxy, ",")
		env["no_proxy"] = env["NO_PROXY"]
	}
	return env
}

// CodeStartupFailed is the error code of a sandbox whose agent could not do its start-up customisation.
const CodeStartupFailed = "startup_failed"

// agentStartupFailure reads a 503 /health answer; when the agent reports {"status":"failed","error":...} it returns
// that as the launch's error. It reads at most 64 KiB and leaves closing the body to the caller.
func agentStartupFailure(resp *http.Response) error {
	if resp.StatusCode != http.StatusServiceUnavailable {
		return nil
	}
	var body agentapi.Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body); err != nil || body.Status != agentapi.StartupFailed {
		return nil
	}
	return &Error{Code: CodeStartupFailed, Message: "sandbox start-up failed: " + body.Error}
}

// WithEgressDefault returns profiles with the gateway-wide proxy settings filled in where a profile sets no proxy of
// its own (its allow-list, if any, is kept). The input is not modified.
func WithEgressDefault(profiles []Profile, def *Egress) []Profile {
	if def == nil || def.Proxy == "" {
		return profiles
	}
	out := make([]Profile, len(profiles))
	for i, p := range profiles {
		if p.Egress == nil || p.Egress.Proxy == "" {
			e := Egress{Proxy: def.Proxy, NoProxy: def.NoProxy}
			if p.Egress != nil {
				e.Allow = p.Egress.Allow
				e.NoProxy = append(append([]string{}, def.NoProxy...), p.Egress.NoProxy...)
			}
			p.Egress = &e
		}
		out[i] = p
	}
	return out
}

// AddDependency adds what one `dependency` line names to d: python|node|r <package> [<version>], or apt <package>
// (apt only through a derived image: make profile-images).
func AddDependency(d *Dependencies, args []string) error {
	managers := map[string]*map[string]string{"python": &d.Python, "node": &d.Node, "r": &d.R}
	var m *map[string]string
	if len(args) > 0 {
		m = managers[args[0]]
	}
	switch {
	case m != nil && len(args) >= 2 && len(args) <= 3:
		if *m == nil {
			*m = map[string]string{}
		}
		version := ""
		if len(args) == 3 {
			version = args[2]
		}
		(*m)[args[1]] = version
	case len(args) == 2 && args[0] == "apt":
		d.Apt = append(d.Apt, args[1])
	default:
		return fmt.Errorf("dependency: want python|node|r <package> [<version>] or apt <package>")
	}
	return nil
}
