package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FastGPTEntrypoint does what FastGPT's agent-sandbox image's entrypoint does at start (reference section 5):
// check the workdir, write the IDE agent's password into HOME when it is missing, then sleep. It also leaves
// ~/.entrypoint-ran with the uid and HOME it saw, so a test can tell the script ran and as whom.
const FastGPTEntrypoint = `#!/bin/sh
set -e
mkdir -p "${FASTGPT_WORKDIR:-/workspace}"
test -w "${FASTGPT_WORKDIR:-/workspace}"
if [ ! -s "$HOME/.fastgpt-ide-agent-password" ]; then
	head -c 24 /dev/urandom | base64 | tr -d '=+/\n' > "$HOME/.fastgpt-ide-agent-password"
fi
echo "uid=$(id -u) home=$HOME" > "$HOME/.entrypoint-ran"
exec sleep infinity
`

var fastgptImage = sync.OnceValues(func() (string, error) {
	tag := strings.TrimSuffix(Getenv("SANDGATE_IMAGE_REPO", "sandgate/sandbox"), "/sandbox") + "/fastgpt-shaped:test"
	dir, err := os.MkdirTemp("", "fastgpt-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		// FastGPT's image: debian-slim, its own user with HOME /home/sandbox holding the entrypoint script.
		"Dockerfile": `FROM debian:bookworm-slim
RUN useradd --uid 1000 --create-home --home-dir /home/sandbox --shell /bin/sh sandbox
COPY entrypoint.sh /home/sandbox/entrypoint.sh
RUN chmod 0755 /home/sandbox/entrypoint.sh && chown sandbox:sandbox /home/sandbox/entrypoint.sh
ENV HOME=/home/sandbox FASTGPT_WORKDIR=/workspace
USER sandbox
WORKDIR /home/sandbox
ENTRYPOINT ["/home/sandbox/entrypoint.sh"]
`,
		"entrypoint.sh": FastGPTEntrypoint,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command("docker", "build", "-q", "-t", tag, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build %s: %v: %s", tag, err, out)
	}
	return tag, nil
})

// FastGPTImage builds, once per test process, an image shaped like FastGPT's fastgpt-agent-sandbox from
// debian:bookworm-slim (present locally; nothing is pulled) and returns its tag, under SANDGATE_IMAGE_REPO's
// prefix so parallel checkouts keep their own.
func FastGPTImage(t testing.TB) string {
	t.Helper()
	Integration(t)
	tag, err := fastgptImage()
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
