package testenv

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Compose returns the command that runs Compose files: `docker compose` where the plugin is installed, else
// Debian's `docker-compose` (installed by scripts/prereqs.sh when neither is there).
func Compose(t testing.TB) []string {
	t.Helper()
	Integration(t)
	cmd, err := compose()
	if err != nil {
		t.Fatalf("no Compose for this test: %v", err)
	}
	return cmd
}

var compose = sync.OnceValues(func() ([]string, error) {
	if err := runScript("prereqs.sh", "compose"); err != nil {
		return nil, err
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	return []string{"docker-compose"}, nil
})

// ComposeProject is a Compose project of the test's own, run from one file as it ships.
type ComposeProject struct {
	t          testing.TB
	cmd        []string
	name, file string
	env        []string
}

// StartCompose starts services of file (with --no-deps: only those) as project name, with env added to the
// test's environment; the file's variables are the only way in. When the test ends the project is taken down with
// its volumes, after the services' logs when the test failed.
func StartCompose(t testing.TB, file, name string, env []string, services ...string) *ComposeProject {
	t.Helper()
	p := &ComposeProject{t: t, cmd: Compose(t), name: name, file: file, env: append(os.Environ(), env...)}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := p.Run(append([]string{"logs", "--no-color", "--tail", "80"}, services...)...)
			t.Logf("compose logs:\n%s", logs)
		}
		if out, err := p.Run("down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Logf("compose down: %v\n%s", err, out)
		}
	})
	if out, err := p.Run(append([]string{"up", "-d", "--no-deps"}, services...)...); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	return p
}

// Run runs one Compose command on the project and returns its combined output.
func (p *ComposeProject) Run(args ...string) (string, error) {
	argv := append(append(p.cmd[1:len(p.cmd):len(p.cmd)], "-p", p.name, "-f", p.file), args...)
	cmd := exec.Command(p.cmd[0], argv...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WaitAPIKey reads the JSON file path inside service until its api_key is set (a gateway writes credentials.json
// on its first start) and returns the key.
func (p *ComposeProject) WaitAPIKey(ctx context.Context, service, path string) string {
	p.t.Helper()
	var creds struct {
		APIKey string `json:"api_key"`
	}
	for {
		out, err := p.Run("exec", "-T", service, "cat", path)
		if err == nil && json.Unmarshal([]byte(out), &creds) == nil && creds.APIKey != "" {
			return creds.APIKey
		}
		if ctx.Err() != nil {
			p.t.Fatalf("no %s in %s: %v\n%s", path, service, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
