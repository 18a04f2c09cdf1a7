package agentapi

import (
	"fmt"
	"regexp"
)

// Wire types of what users customise in a sandbox: init hooks, user services, dependencies and package mirrors (the
// Node.js kernel shares the Python kernel's types, in kernel.go). The gateway passes the customisation to the agent as JSON in these environment variables.
const (
	// EnvInit is a JSON array of shell commands run in order (bash -c) before the agent reports ready.
	EnvInit = "SANDGATE_INIT"
	// EnvServices is a JSON array of ServiceSpec the agent supervises.
	EnvServices = "SANDGATE_SERVICES"
	// EnvDependencies is a JSON Dependencies document installed before the agent reports ready.
	EnvDependencies = "SANDGATE_DEPENDENCIES"
	// EnvMirrors is a JSON Mirrors document written into HOME at start.
	EnvMirrors = "SANDGATE_MIRRORS"
)

// Restart policies of a user service.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
	RestartNever     = "never"
)

// ServiceSpec is a long-running process the agent supervises.
type ServiceSpec struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Port    int               `json:"port,omitempty"`
	Restart string            `json:"restart,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// ServiceStatus is one entry of GET /v1/services.
type ServiceStatus struct {
	Name     string   `json:"name"`
	State    string   `json:"state"` // starting | running | backoff | exited | failed
	PID      int      `json:"pid,omitempty"`
	Restarts int      `json:"restarts"`
	Port     int      `json:"port,omitempty"`
	ExitCode *int     `json:"exit_code,omitempty"`
	LastLog  []string `json:"last_log"`
}

// Dependencies are packages installed when the sandbox starts.
type Dependencies struct {
	Python map[string]string `json:"python,omitempty"`
	Node   map[string]string `json:"node,omitempty"`
	// R packages {name: version}: installed into the workspace library (R_LIBS_USER) from the profile's
	// cran_mirror unless the image already has them (make profile-images bakes them from Debian's r-cran-*). The
	// version is checked after install: "" or "*" is any, "1.2" or ">=1.2" a minimum, "==1.2" (also >, <, <=) exact.
	R map[string]string `json:"r,omitempty"`
	// Apt packages cannot be installed at runtime (non-root, read-only root): they are built into a derived image.
	Apt []string `json:"apt,omitempty"`
}

// Package names and versions are checked strictly before anything reaches an installer's command line. The
// gateway (refusing a create early) and the agent (before installing) check with these same patterns.
var (
	pythonDepName    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?$`)
	pythonDepVersion = regexp.MustCompile(`^((==|>=|<=|~=|!=|<|>)?[0-9A-Za-z.*+!]{1,64})(,(==|>=|<=|~=|!=|<|>)[0-9A-Za-z.*+!]{1,64}){0,4}$`)
	nodeDepName      = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]{0,100}/)?[a-z0-9][a-z0-9._-]{0,213}$`)
	nodeDepVersion   = regexp.MustCompile(`^[0-9A-Za-z.^~<>=*+ |-]{1,64}$`)
	// CRAN's rule for package names (letters, digits and '.', a letter first, no '.' last); versions are R's
	// package_version, with an optional comparison and no spaces.
	rDepName    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.]{0,98}[A-Za-z0-9]$`)
	rDepVersion = regexp.MustCompile(`^(>=|<=|==|>|<)?[0-9]{1,9}([.-][0-9]{1,9}){1,5}$`)
	aptDepName  = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{1,100}(=[A-Za-z0-9.+~:-]{1,64})?$`)
)

// Validate reports the first invalid package name or version.
func (d Dependencies) Validate() error {
	for name, v := range d.Python {
		if !pythonDepName.MatchString(name) {
			return fmt.Errorf("python dependency %q: not a valid package name", name)
		}
		if v != "" && v != "*" && !pythonDepVersion.MatchString(v) {
			return fmt.Errorf("python dependency %q: version %q is not a version or specifier", name, v)
		}
	}
	for name, v := range d.Node {
		if !nodeDepName.MatchString(name) {
			return fmt.Errorf("node dependency %q: not a valid package name", name)
		}
		if v != "" && !nodeDepVersion.MatchString(v) {
			return fmt.Errorf("node dependency %q: version %q is not a version range", name, v)
		}
	}
	for name, v := range d.R {
		if !rDepName.MatchString(name) {
			return fmt.Errorf("r dependency %q: not a valid R package name (letters, digits and '.', starting with a letter)", name)
		}
		if v != "" && v != "*" && !rDepVersion.MatchString(v) {
			return fmt.Errorf("r dependency %q: version %q is not a version with an optional >=, >, ==, <= or <", name, v)
		}
	}
	for _, name := range d.Apt {
		if !aptDepName.MatchString(name) {
			return fmt.Errorf("apt dependency %q: not a valid package name", name)
		}
	}
	return nil
}

// Mirrors are package registry settings written into HOME (FastGPT's files).
type Mirrors struct {
	NPMRegistry  string `json:"npm_registry,omitempty"`
	PyPIIndexURL string `json:"pypi_index_url,omitempty"`
	AptMirror    string `json:"apt_mirror,omitempty"`
	// CRANMirror is the repository R dependencies install from (install.packages' repos); no file is written.
	CRANMirror string `json:"cran_mirror,omitempty"`
}

// Startup states reported by GET /health and GET /v1/init/log.
const (
	StartupStarting = "starting"
	StartupReady    = "ok"
	StartupFailed   = "failed"
)

// InitLog is GET /v1/init/log: what the start-up steps (mirrors, dependencies, init commands) did.
type InitLog struct {
	Status string     `json:"status"`
	Error  string     `json:"error,omitempty"`
	Steps  []InitStep `json:"steps"`
}

// InitStep is one start-up step with its kept output.
type InitStep struct {
	Name       string `json:"name"`
	Command    string `json:"command,omitempty"`
	ExitCode   int    `json:"exit_code"`
	Output     string `json:"output"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}
