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

var (
	gatewayImageOnce sync.Once
	gatewayImageTag  string
	gatewayImageErr  error
)

// GatewayImage builds the top-level Dockerfile, as `make gateway-image` does, once per test process and returns
// its tag. The build context holds only what .dockerignore lets in (the binary and deploy/fastgpt/Caddyfile), so a
// file the image needs but the ignore list drops fails here. The tag follows SANDGATE_IMAGE_REPO's prefix
// (sandgate/gateway-test by default): parallel checkouts never overwrite each other's.
func GatewayImage(t testing.TB) string {
	t.Helper()
	Integration(t)
	bin := CaddyBinary(t)
	gatewayImageOnce.Do(func() {
		repo := strings.TrimSuffix(Getenv("SANDGATE_IMAGE_REPO", "sandgate/sandbox"), "/sandbox")
		tag := repo + "/gateway-test:latest"
		ctxDir, err := os.MkdirTemp("", "sandgate-gateway-image-")
		if err != nil {
			gatewayImageErr = err
			return
		}
		defer os.RemoveAll(ctxDir)
		files := map[string]string{bin: "caddy"}
		for _, f := range []string{"Dockerfile", ".dockerignore", "deploy/fastgpt/Caddyfile"} {
			files[filepath.Join(RepoRoot(), f)] = f
		}
		for src, dst := range files {
			if gatewayImageErr = copyInto(src, filepath.Join(ctxDir, dst)); gatewayImageErr != nil {
				return
			}
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", tag, ctxDir).CombinedOutput(); err != nil {
			gatewayImageErr = fmt.Errorf("docker build of the gateway image: %v\n%s", err, out)
			return
		}
		gatewayImageTag = tag
	})
	if gatewayImageErr != nil {
		t.Fatal(gatewayImageErr)
	}
	return gatewayImageTag
}

// copyInto copies src to dst, creating dst's directory and keeping src's mode.
func copyInto(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}

var (
	composeOnce sync.Once
	composeCmd  []string
	composeErr  error
)

// Compose returns the command that runs Compose files: `docker compose` where the plugin is installed, else
// Debian's `docker-compose` (installed by scripts/prereqs.sh when neither is there).
func Compose(t testing.TB) []string {
	t.Helper()
	Integration(t)
	composeOnce.Do(func() {
		if composeErr = runScript("prereqs.sh", "compose"); composeErr != nil {
			return
		}
		if exec.Command("docker", "compose", "version").Run() == nil {
			composeCmd = []string{"docker", "compose"}
			return
		}
		composeCmd = []string{"docker-compose"}
	})
	if composeErr != nil {
		t.Fatalf("no Compose for this test: %v", composeErr)
	}
	return composeCmd
}
