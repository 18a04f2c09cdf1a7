package mcpapi

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBridgeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://gw.example.com": "https://gw.example.com/mcp", "https://gw.example.com/": "https://gw.example.com/mcp",
		"https://gw.example.com/mcp": "https://gw.example.com/mcp", "http://127.0.0.1:8114/mcp/": "http://127.0.0.1:8114/mcp",
	} {
		if got, err := BridgeURL(in); err != nil || got != want {
			t.Errorf("BridgeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := BridgeURL("/"); err == nil {
		t.Error("an empty URL accepted")
	}
}

// TestBridgeKey: the file wins over the environment, a trailing newline is dropped, and an empty key from either
// is an error that names where it looked.
func TestBridgeKey(t *testing.T) {
	dir := t.TempDir()
	keyFile, empty := filepath.Join(dir, "key"), filepath.Join(dir, "empty")
	if err := os.WriteFile(keyFile, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRIDGE_TEST_KEY", " sk-env ")
	for _, tc := range []struct {
		file, env, want string
	}{
		{keyFile, "BRIDGE_TEST_KEY", "sk-file"},
		{"", "BRIDGE_TEST_KEY", "sk-env"},
		{empty, "BRIDGE_TEST_KEY", ""},
		{filepath.Join(dir, "missing"), "BRIDGE_TEST_KEY", ""},
		{"", "BRIDGE_TEST_UNSET", ""},
	} {
		got, err := BridgeKey(tc.file, tc.env)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("BridgeKey(%q, %q) = %q, %v; want %q", tc.file, tc.env, got, err, tc.want)
		}
	}
}
