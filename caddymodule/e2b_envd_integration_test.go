package caddymodule_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/internal/testenv"
)

// TestE2BSDKEnvd drives envd through the gateway on Caddyfile.example with the real npm e2b SDK, unmodified:
// commands (blocking, streamed onStdout, non-zero exit, root refused, 2 MB of output, background with list,
// sendStdin, connect and kill), files (text, 3 MB of binary, several at once, list, exists, getInfo, rename,
// remove, makeDir, metadata, watchDir with entries) and a PTY (input, resize, kill), all through E2B's edge at
// 49983-{id}.{domain} with the sandbox's access token.
func TestE2BSDKEnvd(t *testing.T) {
	_, env, _ := e2bExample(t)
	script := filepath.Join(testenv.RepoRoot(), "agentimage", "testdata", "e2b_envd_sdk.cjs")
	out, err := testenv.RunNode(t, script, env...)
	if err != nil || !strings.Contains(out, "E2B SDK OK") {
		t.Fatalf("the E2B SDK script failed: %v\n%s", err, out)
	}
}
