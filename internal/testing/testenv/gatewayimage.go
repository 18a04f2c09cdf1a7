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

// GatewayImage builds the top-level Dockerfile, as `make gateway-image` does, once per test process and returns
// its tag. The build context holds only what .dockerignore lets in (the binary and deploy/fastgpt/Caddyfile), so a
// file the image needs but the ignore list drops fails here. The tag follows SANDGATE_IMAGE_REPO's prefix
// (sandgate/gateway-test by default): parallel checkouts never overwrite each other's.
func GatewayImage(t testing.TB) string {
	t.Helper()
	Integration(t)
	CaddyBinary(t) // its build failing fails the test with the build's own message
	tag, err := gatewayImage()
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

var gatewayImage = sync.OnceValues(func() (string, error) {
	bin, err := caddyBinary()
	if err != nil {
		return "", err
	}
	return buildGatewayImage(bin)
})

func buildGatewayImage(bin string) (string, error) {
	repo := strings.TrimSuffix(Getenv("SANDGATE_IMAGE_REPO", "sandgate/sandbox"), "/sandbox")
	tag := repo + "/gateway-test:latest"
	ctxDir, err := os.MkdirTemp("", "sandgate-gateway-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(ctxDir)
	files := map[string]string{bin: "caddy"}
	for _, f := range []string{"Dockerfile", ".dockerignore", "deploy/fastgpt/Caddyfile"} {
		files[filepath.Join(RepoRoot(), f)] = f
	}
	for src, dst := range files {
		if err := copyInto(src, filepath.Join(ctxDir, dst)); err != nil {
			return "", err
		}
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, ctxDir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build of the gateway image: %v\n%s", err, out)
	}
	return tag, nil
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
