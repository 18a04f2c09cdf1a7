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

// FastGPTEntrypoint does what FastGPT's agent-sandbox image's entrypoint does at start (reference section 5): check
// the workdir, write the IDE agent's password into HOME when it is missing, start the image's own IDE agent when
// asked, then sleep. What it sees and does is left for tests to read:
//   - its log (the container log): a line with its uid, HOME, whether the agent's token reached it and
//     FASTGPT_TEST_MARK (a variable a test sets in the profile), then "password written";
//   - ~/.entrypoint-ran: "uid=<uid> home=<HOME>", read through exec as FastGPT reads the password;
//   - <workdir>/.entrypoint-ran: the uid, read through the files API (which serves the workspace).
//
// The image brings an IDE agent as FastGPT's does: FastGPT's own binary cannot be had here, so its stand-in is our
// agent's copy at /usr/local/bin/fastgpt-ide-agent, serving only the IDE protocol's ports (1318/1319; its own API
// port is loopback-only and has no token). FastGPT's entrypoint starts its agent whenever IDE_AGENT_ENABLED=true;
// this one does only when the profile also leaves the ports to the image (SANDGATE_IDE_AGENT=image), so the same
// image also shows our injected agent serving the IDE protocol (the default, "ours"). The password is written
// before the IDE agent starts, so both sides read one password.
const FastGPTEntrypoint = `#!/bin/sh
set -e
echo "entrypoint: uid=$(id -u) home=$HOME token=${SANDGATE_AGENT_TOKEN:-none} mark=${FASTGPT_TEST_MARK:-unset}"
mkdir -p "${FASTGPT_WORKDIR:-/workspace}"
test -w "${FASTGPT_WORKDIR:-/workspace}"
if [ ! -s "$HOME/.fastgpt-ide-agent-password" ]; then
	head -c 24 /dev/urandom | base64 | tr -d '=+/\n' > "$HOME/.fastgpt-ide-agent-password"
fi
echo "uid=$(id -u) home=$HOME" > "$HOME/.entrypoint-ran"
id -u > "${FASTGPT_WORKDIR:-/workspace}/.entrypoint-ran"
echo "entrypoint: password written"
if [ "${IDE_AGENT_ENABLED:-}" = true ] && [ "${SANDGATE_IDE_AGENT:-}" = image ]; then
	SANDGATE_IDE_AGENT=ours SANDGATE_AGENT_ADDR=127.0.0.1:1317 SANDGATE_CAPABILITIES= SANDGATE_WORKSPACE="${FASTGPT_WORKDIR:-/workspace}" \
		/usr/local/bin/fastgpt-ide-agent >/tmp/ide-agent.log 2>&1 &
	echo "entrypoint: the image's IDE agent started"
fi
exec sleep infinity
`

// fastgptDockerfile is FastGPT's image's shape: debian-slim, its own user (uid 1000) with HOME /home/sandbox
// holding the entrypoint script, and that script as ENTRYPOINT. /etc/anyimage is a world-writable directory in
// the root filesystem, for the writable_root relaxation's test.
const fastgptDockerfile = `FROM debian:bookworm-slim
RUN useradd --uid 1000 --create-home --home-dir /home/sandbox --shell /bin/sh sandbox && mkdir -m 1777 /etc/anyimage
COPY fastgpt-ide-agent /usr/local/bin/fastgpt-ide-agent
COPY entrypoint.sh /home/sandbox/entrypoint.sh
RUN chmod 0755 /home/sandbox/entrypoint.sh /usr/local/bin/fastgpt-ide-agent && chown sandbox:sandbox /home/sandbox/entrypoint.sh
ENV HOME=/home/sandbox FASTGPT_WORKDIR=/workspace
USER sandbox
WORKDIR /home/sandbox
ENTRYPOINT ["/home/sandbox/entrypoint.sh"]
`

var fastgptImage = sync.OnceValues(func() (string, error) {
	tag := strings.TrimSuffix(Getenv("SANDGATE_IMAGE_REPO", "sandgate/sandbox"), "/sandbox") + "/fastgpt-shaped:test"
	dir, err := os.MkdirTemp("", "fastgpt-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "fastgpt-ide-agent"), "./agentimage")
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the agent for the image's IDE agent: %v: %s", err, out)
	}
	files := map[string]string{"Dockerfile": fastgptDockerfile, "entrypoint.sh": FastGPTEntrypoint}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	// The RUN steps need no network: without one the build does not depend on the engine's default bridge (an
	// engine started with --bridge=none, or one whose docker0 is gone, has none).
	cmd := exec.Command("docker", "build", "-q", "--network", "none", "-t", tag, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build %s: %v: %s", tag, err, out)
	}
	return tag, nil
})

// FastGPTImage builds, once per test process, the one image shaped like FastGPT's fastgpt-agent-sandbox
// (FastGPTEntrypoint) from debian:bookworm-slim (present locally; nothing is pulled) and returns its tag, under
// SANDGATE_IMAGE_REPO's prefix so parallel checkouts keep their own.
func FastGPTImage(t testing.TB) string {
	t.Helper()
	Integration(t)
	tag, err := fastgptImage()
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
