package sandboxes

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Ship's conventions as profile options. Shipyard Neo's Ship image runs code as user `shipyard` (uid 1000) with HOME
// /workspace, writes the profile's env to /workspace/.bay_env.sh, and its Gull browser reaches the Ship container by
// the name `ship`. A profile can ask for each of these; none changes a profile that does not (our sandbox user is
// `sandbox`, uid 65532, HOME /home/sandbox). The user, HOME and file are operator configuration: validated here, and
// applied by the Manager (specFor), the Docker driver (sandboxes/docker/identity.go) and the agent (the file).

// SandboxUser names the user a profile's sandboxes run as instead of the images' `sandbox` (65532). Its group has
// the same name and id, as Ship's `shipyard:shipyard`.
type SandboxUser struct {
	Name string `json:"name"`
	UID  int    `json:"uid"`
}

// DefaultSandboxUID is the images' own sandbox user, which runs a profile without a user option.
const DefaultSandboxUID = 65532

// Homes a profile may give its user: the places a sandbox can write (its root filesystem is read-only).
var allowedHomes = []string{SandboxHome, "/workspace", "/tmp"}

// Names a user may take: what useradd accepts by default, short enough for every tool's column.
var userNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// A host alias is one DNS label (the name a sandbox looks up, such as `ship`).
var hostAliasPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Env names an env file may hold: it is a shell script of `export NAME=...` lines.
var shellNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidHostAlias reports whether name can be a host alias (one lowercase DNS label, not localhost).
func ValidHostAlias(name string) bool {
	return hostAliasPattern.MatchString(name) && name != "localhost"
}

// UID is the uid (and gid) p's sandboxes run as.
func (p *Profile) UID() int {
	if p.User != nil {
		return p.User.UID
	}
	return DefaultSandboxUID
}

// validateShip checks the user, home, env_file and host_aliases options.
func (p *Profile) validateShip() error {
	if u := p.User; u != nil {
		if !userNamePattern.MatchString(u.Name) {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: user name %q must be lowercase letters, digits, '_' or '-', starting with a letter or '_' (at most 32)", p.ID, u.Name)}
		}
		if u.Name == "root" || u.UID < 1 || u.UID > 65533 {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: user uid %d must be between 1 and 65533 and the user not root: sandboxes never run as root", p.ID, u.UID)}
		}
		if p.InjectsAgent() {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: user is for images that carry the agent (sandgate/sandbox:*); an image with an injected agent keeps its own users", p.ID)}
		}
		if p.Network == NetworkNone {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: user cannot be combined with network none (the agent's socket directory belongs to the images' sandbox user)", p.ID)}
		}
	}
	if p.Home != "" && !slices.Contains(allowedHomes, p.Home) {
		return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: home %q must be one of %s (the writable places of a sandbox)", p.ID, p.Home, strings.Join(allowedHomes, ", "))}
	}
	if p.EnvFile != "" {
		dir, name := path.Split(p.EnvFile)
		if dir != WorkspaceMount+"/" || name == "" || name == "." || name == ".." || path.Clean(p.EnvFile) != p.EnvFile {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: env_file %q must name a file directly in %s (such as %s/.bay_env.sh)", p.ID, p.EnvFile, WorkspaceMount, WorkspaceMount)}
		}
		for k := range p.Env {
			if !shellNamePattern.MatchString(k) {
				return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: env %q cannot be written to env_file: a name there is a shell variable (letters, digits, '_')", p.ID, k)}
			}
		}
	}
	seen := map[string]bool{}
	for _, a := range p.HostAliases {
		if !ValidHostAlias(a) {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: host alias %q must be one lowercase DNS label, not localhost", p.ID, a)}
		}
		if seen[a] {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("profile %q: host alias %q is named twice", p.ID, a)}
		}
		seen[a] = true
	}
	return nil
}

// WorkspaceMount is where every sandbox sees its workspace.
const WorkspaceMount = "/workspace"

// shipEnv adds what p's Ship options put in a sandbox's environment: HOME (over the caller's: it is the operator's),
// USER and LOGNAME for a named user, and the env file's path and names for the agent to write it.
func (p *Profile) shipEnv(env map[string]string) {
	if p.Home != "" {
		env["HOME"] = p.Home
	}
	if p.User != nil {
		env["USER"] = p.User.Name
		env["LOGNAME"] = p.User.Name
	}
	// Only the profile asks the agent for the file: a caller's create env naming these variables is dropped.
	delete(env, agentapi.EnvEnvFile)
	delete(env, agentapi.EnvEnvFileNames)
	if p.EnvFile != "" {
		names := make([]string, 0, len(p.Env))
		for k := range p.Env {
			if !strings.HasPrefix(k, "SANDGATE_") { // the agent's own settings are not the profile's env
				names = append(names, k)
			}
		}
		sort.Strings(names)
		env[agentapi.EnvEnvFile] = p.EnvFile
		env[agentapi.EnvEnvFileNames] = strings.Join(names, ",")
	}
}

// Passwd is the line of /etc/passwd naming p's user (home is p's HOME, our images' HOME by default), "" without one.
func (p *Profile) Passwd() string {
	if p.User == nil {
		return ""
	}
	home := p.Home
	if home == "" {
		home = SandboxHome
	}
	id := strconv.Itoa(p.User.UID)
	return p.User.Name + ":x:" + id + ":" + id + "::" + home + ":/bin/bash"
}

// identityDirName is the directory, in ManagerConfig.SocketDir, of the passwd and group files of sandboxes with a
// named user (no sandbox id starts with '_', so it never meets a socket directory).
const identityDirName = "_identity"

// identityDir is ContainerSpec.IdentityDir for p: "" unless p names its user.
func (m *Manager) identityDir(p Profile) string {
	if p.User == nil {
		return ""
	}
	return filepath.Join(m.mcfg.SocketDir, identityDirName)
}

// ParseSandboxUser reads a profile's `user <name> <uid>`.
func ParseSandboxUser(name, uid string) (*SandboxUser, error) {
	n, err := strconv.Atoi(uid)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q is not a number", name, uid)
	}
	return &SandboxUser{Name: name, UID: n}, nil
}
