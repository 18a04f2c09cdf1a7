// Package envfile writes the sandbox's env file: Shipyard Neo's /workspace/.bay_env.sh, a shell script of
// `export NAME='value'` lines holding a profile's env, which Ship's tools and tenants' scripts source. The gateway
// names the file and the variables (agentapi.EnvEnvFile, EnvEnvFileNames); the values are the agent's own
// environment, which the container was created with.
package envfile

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A name the file can hold: a shell variable.
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Render is the file's content: one export line per name that is a shell variable, in the order given, each value
// in single quotes (a quote inside is closed, escaped and reopened) so the shell reads it back byte for byte.
func Render(names []string, getenv func(string) (string, bool)) []byte {
	var b strings.Builder
	b.WriteString("# written by sandgate-agent at each start: the profile's env\n")
	for _, n := range names {
		if !shellName.MatchString(n) {
			continue
		}
		v, ok := getenv(n)
		if !ok {
			continue
		}
		b.WriteString("export " + n + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'\n")
	}
	return []byte(b.String())
}

// Write writes the file at path, which must lie directly in workspace, through a new file renamed over the old one:
// a link the tenant left at path is replaced, not written through. The agent
// runs as the sandbox user, so it can write nothing the tenant could not.
func Write(workspace, path string, content []byte) error {
	if filepath.Dir(path) != filepath.Clean(workspace) || filepath.Base(path) != filepath.Clean(filepath.Base(path)) {
		return fmt.Errorf("the env file %q is not directly in the workspace %s", path, workspace)
	}
	tmp, err := os.CreateTemp(workspace, ".sandgate-envfile-*")
	if err != nil {
		return fmt.Errorf("writing the env file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the env file: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the env file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the env file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the env file: %w", err)
	}
	return nil
}
