// Package mirrors writes package-registry settings into a sandbox's HOME: exactly the files FastGPT's mirrors.ts
// writes (npm, yarn, bun, pip, uv), plus the apt source. It is the one implementation for the agent's profiles and
// the FastGPT IDE agent.
//
// apt is special: its sources live in /etc, which is on the read-only root filesystem of a hardened sandbox. The
// file is written only where /etc/apt/sources.list.d is writable (an image run without --read-only, or a derived
// image build); otherwise the Report says why it was skipped, and the agent shows that in /v1/info.
package mirrors

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// FastGPT's names for the same settings (environment of its sandboxes).
const (
	EnvNPMRegistry = "AGENT_SANDBOX_NPM_REGISTRY"
	EnvPyPIIndex   = "AGENT_SANDBOX_PYPI_INDEX_URL"
	EnvAptMirror   = "AGENT_SANDBOX_APT_MIRROR"
)

const (
	// StateFile and StateKey are FastGPT's runtime-state file and key holding the hash of the applied settings.
	StateFile = ".fastgpt-runtime-state.json"
	StateKey  = "sandboxPackageMirrors"
	// AptSourcesFile is where the apt source goes (deb822).
	AptSourcesFile = "/etc/apt/sources.list.d/00-fastgpt-mirror.sources"
)

// Options say where things are; zero values mean the real system paths.
type Options struct {
	OSRelease string // default /etc/os-release
	AptFile   string // default AptSourcesFile
}

// Report is what Apply did.
type Report struct {
	Files []string `json:"files"`
	// Apt is "written", "unchanged", "not configured", or why the apt source was not written.
	Apt    string   `json:"apt"`
	Errors []string `json:"errors,omitempty"`
}

// FromEnv reads FastGPT's three variables.
func FromEnv() agentapi.Mirrors {
	return agentapi.Mirrors{
		NPMRegistry:  strings.TrimSpace(os.Getenv(EnvNPMRegistry)),
		PyPIIndexURL: strings.TrimSpace(os.Getenv(EnvPyPIIndex)),
		AptMirror:    strings.TrimSpace(os.Getenv(EnvAptMirror)),
	}
}

// Validate refuses settings that are not absolute http(s) URLs (they end up in config files verbatim).
func Validate(m agentapi.Mirrors) error {
	for name, v := range map[string]string{"npm_registry": m.NPMRegistry, "pypi_index_url": m.PyPIIndexURL, "apt_mirror": m.AptMirror, "cran_mirror": m.CRANMirror} {
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(v, "\"\n\r \t") {
			return fmt.Errorf("%s %q is not an http(s) URL", name, v)
		}
	}
	return nil
}

type file struct{ path, content string }

type osRelease struct{ id, codename string }

func readOSRelease(path string) osRelease {
	var r osRelease
	f, err := os.Open(path)
	if err != nil {
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			r.id = v
		case "VERSION_CODENAME":
			r.codename = v
		}
	}
	return r
}

func homeFiles(home string, m agentapi.Mirrors) []file {
	var out []file
	if r := m.NPMRegistry; r != "" {
		out = append(out,
			file{filepath.Join(home, ".npmrc"), "registry=" + r + "\n"},
			file{filepath.Join(home, ".yarnrc"), fmt.Sprintf("registry %q\n", r)},
			file{filepath.Join(home, ".yarnrc.yml"), fmt.Sprintf("npmRegistryServer: %q\n", r)},
			file{filepath.Join(home, ".bunfig.toml"), fmt.Sprintf("[install]\nregistry = %q\n", r)},
		)
	}
	if idx := m.PyPIIndexURL; idx != "" {
		host := idx
		if u, err := url.Parse(idx); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
		pip := fmt.Sprintf("[global]\nindex-url = %s\ntrusted-host = %s\n", idx, host)
		out = append(out,
			file{filepath.Join(home, ".pip", "pip.conf"), pip},
			file{filepath.Join(home, ".config", "pip", "pip.conf"), pip},
			file{filepath.Join(home, ".config", "uv", "uv.toml"), fmt.Sprintf("default-index = %q\nallow-insecure-host = [%q]\n", idx, host)},
		)
	}
	return out
}

// AptSource is the deb822 source for mirror on the system rel: Ubuntu as FastGPT writes it; Debian the equivalent
// (the security suite lives on another archive, so it is left to the image's own source).
func aptSource(mirror string, rel osRelease) (string, bool) {
	c := rel.codename
	switch {
	case mirror == "" || c == "":
		return "", false
	case rel.id == "ubuntu":
		return fmt.Sprintf("Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports %s-security\n"+
			"Components: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n",
			mirror, c, c, c, c), true
	case rel.id == "debian":
		return fmt.Sprintf("Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports\n"+
			"Components: main contrib non-free non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
			mirror, c, c, c), true
	}
	return "", false
}

func hash(m agentapi.Mirrors) string {
	sum := sha256.Sum256([]byte(m.NPMRegistry + "\n" + m.PyPIIndexURL + "\n" + m.AptMirror))
	return hex.EncodeToString(sum[:])
}

// Apply writes the files for m into home, once per setting: the settings' hash is kept under StateKey in
// home/StateFile, so a file the user edited afterwards stays edited; the apt file (outside HOME) is checked each time.
// Failures are reported, never fatal (as in FastGPT).
func Apply(home string, m agentapi.Mirrors, opts Options) Report {
	if opts.OSRelease == "" {
		opts.OSRelease = "/etc/os-release"
	}
	if opts.AptFile == "" {
		opts.AptFile = AptSourcesFile
	}
	rep := Report{Files: []string{}, Apt: "not configured"}
	// R's repository is an argument of the dependency install (startup), not a file: FastGPT writes none.
	m.CRANMirror = ""
	if home == "" || (m == agentapi.Mirrors{}) {
		return rep
	}
	statePath := filepath.Join(home, StateFile)
	state := map[string]any{}
	if b, err := os.ReadFile(statePath); err == nil {
		_ = json.Unmarshal(b, &state)
	}
	files := homeFiles(home, m)
	applied := state[StateKey] == hash(m)
	ok := true
	if !applied {
		for _, f := range files {
			if err := writeIfChanged(f.path, f.content); err != nil {
				ok = false
				rep.Errors = append(rep.Errors, fmt.Sprintf("writing %s: %v", f.path, err))
				continue
			}
			rep.Files = append(rep.Files, f.path)
		}
	}
	if m.AptMirror != "" {
		rel := readOSRelease(opts.OSRelease)
		src, known := aptSource(m.AptMirror, rel)
		switch {
		case !known:
			rep.Apt = fmt.Sprintf("skipped: no apt source for system %q (codename %q)", rel.id, rel.codename)
		default:
			if b, err := os.ReadFile(opts.AptFile); err == nil && string(b) == src {
				rep.Apt = "unchanged"
			} else if err := writeIfChanged(opts.AptFile, src); err != nil {
				rep.Apt = fmt.Sprintf("skipped: %s is not writable (the sandbox's root filesystem is read-only and apt needs root): "+
					"bake apt packages and sources into a derived image (make profile-images)", filepath.Dir(opts.AptFile))
			} else {
				rep.Apt = "written"
				rep.Files = append(rep.Files, opts.AptFile)
			}
		}
	}
	if ok && !applied {
		state[StateKey] = hash(m)
		b, _ := json.MarshalIndent(state, "", "  ")
		if err := os.WriteFile(statePath, b, 0o600); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("saving %s: %v", statePath, err))
		}
	}
	return rep
}

func writeIfChanged(path, content string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == content {
		return nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".sandgate-tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
