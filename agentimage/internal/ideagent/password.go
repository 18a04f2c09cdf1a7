package ideagent

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// ensurePassword returns the agent password from path, writing 32 random bytes (base64url, no padding) first when
// the file is missing or empty. FastGPT reads the same file with `cat` and hands it to the proxy.
func ensurePassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading IDE agent password: %w", err)
	}
	if p := strings.TrimSpace(string(b)); p != "" {
		return p, nil
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating IDE agent password: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(p), 0o600); err != nil {
		return "", fmt.Errorf("writing IDE agent password: %w", err)
	}
	return p, nil
}
