package ideagent

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Package-mirror variables: FastGPT writes the same files into a sandbox when its main service has them set.
const (
	EnvNPMRegistry = "AGENT_SANDBOX_NPM_REGISTRY"
	EnvPyPIIndex   = "AGENT_SANDBOX_PYPI_INDEX_URL"
	EnvAptMirror   = "AGENT_SANDBOX_APT_MIRROR"

	runtimeStateFile = ".fastgpt-runtime-state.json"
	mirrorStateKey   = "sandboxPackageMirrors"
	aptSourcesFile   = "/etc/apt/sources.list.d/00-fastgpt-mirror.sources"
)

// Mirrors are the package-mirror settings.
type Mirrors struct {
	NPMRegistry, PyPIIndex, AptMirror string
}

// MirrorsFromEnv reads the three variables.
func MirrorsFromEnv() Mirrors {
	return Mirrors{
		NPMRegistry: strings.TrimSpace(os.Getenv(EnvNPMRegistry)),
		PyPIIndex:   strings.TrimSpace(os.Getenv(EnvPyPIIndex)),
		AptMirror:   strings.TrimSpace(os.Getenv(EnvAptMirror)),
	}
}

func (m Mirrors) empty() bool { return m.NPMRegistry == "" && m.PyPIIndex == "" && m.AptMirror == "" }

func (m Mirrors) hash() string {
	sum := sha256.Sum256([]byte(m.NPMRegistry + "\n" + m.PyPIIndex + "\n" + m.AptMirror))
	return hex.EncodeToString(sum[:])
}

// osRelease is what apt needs to know about the system.
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

// mirrorFile is one file to write.
type mirrorFile struct {
	path, content string
}

// mirrorFiles lists what m configures, as FastGPT's mirrors.ts writes it. apt is configured on Ubuntu only.
func mirrorFiles(home string, m Mirrors, rel osRelease, aptPath string) []mirrorFile {
	var out []mirrorFile
	if r := m.NPMRegistry; r != "" {
		out = append(out,
			mirrorFile{filepath.Join(home, ".npmrc"), "registry=" + r + "\n"},
			mirrorFile{filepath.Join(home, ".yarnrc"), fmt.Sprintf("registry %q\n", r)},
			mirrorFile{filepath.Join(home, ".yarnrc.yml"), fmt.Sprintf("npmRegistryServer: %q\n", r)},
			mirrorFile{filepath.Join(home, ".bunfig.toml"), fmt.Sprintf("[install]\nregistry = %q\n", r)},
		)
	}
	if idx := m.PyPIIndex; idx != "" {
		host := idx
		if u, err := url.Parse(idx); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
		pip := fmt.Sprintf("[global]\nindex-url = %s\ntrusted-host = %s\n", idx, host)
		out = append(out,
			mirrorFile{filepath.Join(home, ".pip", "pip.conf"), pip},
			mirrorFile{filepath.Join(home, ".config", "pip", "pip.conf"), pip},
			mirrorFile{filepath.Join(home, ".config", "uv", "uv.toml"), fmt.Sprintf("default-index = %q\nallow-insecure-host = [%q]\n", idx, host)},
		)
	}
	if m.AptMirror != "" && rel.id == "ubuntu" && rel.codename != "" {
		c := rel.codename
		out = append(out, mirrorFile{aptPath, fmt.Sprintf("Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports %s-security\n"+
			"Components: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n",
			m.AptMirror, c, c, c, c)})
	}
	return out
}

// ApplyMirrors writes the package-mirror files into home once per setting: a hash of the settings is kept under
// sandboxPackageMirrors in $HOME/.fastgpt-runtime-state.json, and the apt file is checked again each time (it
// lives outside HOME). Failures are logged, never fatal, as in FastGPT.
func ApplyMirrors(home string, m Mirrors, log *slog.Logger) {
	applyMirrors(home, m, readOSRelease("/etc/os-release"), aptSourcesFile, log)
}

func applyMirrors(home string, m Mirrors, rel osRelease, aptPath string, log *slog.Logger) {
	if m.empty() || home == "" {
		return
	}
	statePath := filepath.Join(home, runtimeStateFile)
	state := map[string]any{}
	if b, err := os.ReadFile(statePath); err == nil {
		_ = json.Unmarshal(b, &state)
	}
	files := mirrorFiles(home, m, rel, aptPath)
	hash := m.hash()
	if state[mirrorStateKey] == hash {
		aptOK := true
		for _, f := range files {
			if f.path == aptPath {
				if b, err := os.ReadFile(aptPath); err != nil || string(b) != f.content {
					aptOK = false
				}
			}
		}
		if aptOK {
			return
		}
	}
	failed := false
	for _, f := range files {
		if err := writeIfChanged(f.path, f.content); err != nil {
			failed = true
			log.Warn("package mirror file not written", "path", f.path, "error", err.Error())
		}
	}
	if failed {
		return
	}
	state[mirrorStateKey] = hash
	b, _ := json.MarshalIndent(state, "", "  ")
	if err := os.WriteFile(statePath, b, 0o600); err != nil {
		log.Warn("package mirror state not saved", "error", err.Error())
	}
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
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
