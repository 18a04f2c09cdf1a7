package main_test

import (
	"bytes"
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// toolsScript is what an agent used to Bay's Ship image runs first: python (not only python3), a venv with pip,
// node, npm and pnpm (not in r), curl, git and unzip, as the sandbox user under the read-only root's rules (writes go to the
// workspace and $HOME only).
const toolsScript = `set -e
python -m venv /workspace/v
/workspace/v/bin/pip --version
python -c 'print(1)'
pip --version
node -e 1
npm --version
curl --version | head -n 1
git --version
unzip -v | head -n 1
npm config get prefix
if command -v pnpm >/dev/null; then echo "pnpm $(pnpm --version)"; else echo no-pnpm; fi
`

// TestImageToolsAsSandboxUser runs toolsScript in every image target, hardened as a sandbox is.
func TestImageToolsAsSandboxUser(t *testing.T) {
	for _, target := range []string{"base", "node", "browser", "r"} {
		t.Run(target, func(t *testing.T) {
			image := testenv.Image(t, target)
			out, err := exec.Command("docker", "run", "--rm", "--user", "65532:65532", "--cap-drop", "ALL",
				"--security-opt", "no-new-privileges", "--read-only",
				"--tmpfs", "/tmp:rw,exec,nosuid,size=256m", "--tmpfs", "/home/sandbox:rw,exec,nosuid,size=256m,uid=65532,gid=65532",
				"-v", "/workspace", "--entrypoint", "bash", image, "-c", toolsScript).CombinedOutput()
			if err != nil {
				t.Fatalf("tools as the sandbox user in %s: %v\n%s", image, err, out)
			}
			pnpm := "pnpm 9.15.9" // Ship's image has pnpm; the r image is not a Ship stand-in
			if target == "r" {
				pnpm = "no-pnpm"
			}
			for _, want := range []string{"pip ", "\n1\n", "curl ", "git version", "UnZip", "/home/sandbox/.npm-global", pnpm} {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s: output lacks %q:\n%s", image, want, out)
				}
			}
		})
	}
}

func rExec(t *testing.T, sb *testenv.Sandbox, code string) agentapi.KernelExecResult {
	t.Helper()
	return kernelExec(t, sb, "r", code, 60000)
}

// TestRKernelKeepsStateAndPlots: the r image's persistent R session keeps a variable across calls, returns a plot
// as PNG, and reports an R error with its message. Under runc and under gVisor (runsc), whose sandbox must read
// gVisor's kernel from R too.
func TestRKernelKeepsStateAndPlots(t *testing.T) {
	eachRuntime(t, rKernelKeepsStateAndPlots)
}

func rKernelKeepsStateAndPlots(t *testing.T, runtime string) {
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Target: "r", Runtime: runtime})
	if res := rExec(t, sb, "x <- 21\ncat('set\\n')"); !res.Success || res.Stdout != "set\n" || res.ExecutionCount != 1 {
		t.Fatalf("first call: %+v %+v", res, res.Error)
	}
	res := rExec(t, sb, "x * 2\nplot(1:10, main = 'sandgate')\nmessage('to stderr')")
	if !res.Success || !strings.Contains(res.Stdout, "[1] 42") || !strings.Contains(res.Stderr, "to stderr") || res.ExecutionCount != 2 {
		t.Fatalf("second call: %+v %+v", res, res.Error)
	}
	if len(res.Images) != 1 {
		t.Fatalf("plot: %d images", len(res.Images))
	}
	png, err := base64.StdEncoding.DecodeString(res.Images[0])
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("plot is not a PNG (%d bytes, %v)", len(png), err)
	}
	res = rExec(t, sb, "stop('boom')")
	if res.Success || res.Error == nil || !strings.Contains(res.Error.EValue, "boom") {
		t.Fatalf("an R error: %+v %+v", res, res.Error)
	}
	if res := rExec(t, sb, "x"); !res.Success || !strings.Contains(res.Stdout, "[1] 21") || len(res.Images) != 0 {
		t.Fatalf("state after an error: %+v %+v", res, res.Error)
	}
	if runtime != "" {
		if res := rExec(t, sb, "cat(Sys.info()[['release']])"); !res.Success || !strings.Contains(res.Stdout, "gvisor") {
			t.Fatalf("R under %s reads release %+v %+v, want gVisor's", runtime, res, res.Error)
		}
	}
}
