package service

import (
	"github.com/sandgate/sandgate/sandboxes"

	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DefaultOwner owns what Bay's single key (and an anonymous caller without X-Owner) creates.
const DefaultOwner = "default"

// Principal is who is calling. Every dialect resolves its own credentials (a bearer header, a console session) to
// one, and every operation checks ownership against it.
type Principal struct {
	Owner string
	// Admin sees and manages every owner's sandboxes.
	Admin bool
}

// Sees is THE owner rule, written once: p may see and act on what owner owns. Another owner's sandbox, workspace,
// snapshot or event does not exist for p.
func (p Principal) Sees(owner string) bool { return p.Admin || owner == p.Owner }

// listOwner is the owner filter of p's lists: "" (everyone's) for an admin.
func (p Principal) listOwner() string {
	if p.Admin {
		return ""
	}
	return p.Owner
}

// KeyConfig is one configured API key.
type KeyConfig struct {
	Key   string `json:"key"`
	Owner string `json:"owner,omitempty"`
	Admin bool   `json:"admin,omitempty"`
}

// ParseKeyLine reads a configured key line, `key <secret> <owner> [admin]`.
func ParseKeyLine(args []string) (KeyConfig, error) {
	if len(args) < 2 || len(args) > 3 || (len(args) == 3 && args[2] != "admin") {
		return KeyConfig{}, errors.New("usage: key <secret> <owner> [admin]")
	}
	return KeyConfig{Key: args[0], Owner: args[1], Admin: len(args) == 3}, nil
}

// ParseConsoleKeyLine reads a console key line's arguments, `<key> [owner <name>] [admin]`.
func ParseConsoleKeyLine(args []string) (KeyConfig, error) {
	if len(args) == 0 {
		return KeyConfig{}, errors.New("console_key: want <key> [owner <name>] [admin]")
	}
	k := KeyConfig{Key: args[0]}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "admin":
			k.Admin = true
		case "owner":
			if i++; i == len(args) {
				return KeyConfig{}, errors.New("console_key: owner needs a name")
			}
			k.Owner = args[i]
		default:
			return KeyConfig{}, fmt.Errorf("console_key: unknown option %q (owner <name>, admin)", args[i])
		}
	}
	return k, nil
}

// KeySource says where the primary key came from, in Bay's order.
type KeySource string

const (
	KeyFromEnv       KeySource = "env"
	KeyFromConfig    KeySource = "config"
	KeyFromStore     KeySource = "stored"
	KeyFromGenerated KeySource = "generated"
)

// KeyRing checks bearer tokens against SHA-256 hashes; plaintext keys are never kept.
type KeyRing struct {
	keys   map[string]Principal // sha256 hex -> principal
	Source KeySource
}

// HashKey is the at-rest form of a key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Lookup finds the principal of a bearer token.
func (k *KeyRing) Lookup(token string) (Principal, bool) {
	h := HashKey(token)
	for hash, p := range k.keys {
		// Constant-time over the hashes; the map is small.
		if subtle.ConstantTimeCompare([]byte(hash), []byte(h)) == 1 {
			return p, true
		}
	}
	return Principal{}, false
}

// Len is how many keys are accepted.
func (k *KeyRing) Len() int { return len(k.keys) }

// KeyStore keeps generated API keys across restarts (the gateway's embedded store).
type KeyStore interface {
	ActiveKeys() ([]sandboxes.StoredKey, error)
	PutKey(k sandboxes.StoredKey) error
}

// NewKeyRing accepts exactly the configured keys (a console's own keys, a test's); an empty key is refused.
func NewKeyRing(keys []KeyConfig) (*KeyRing, error) {
	ring := &KeyRing{keys: map[string]Principal{}, Source: KeyFromConfig}
	for i, k := range keys {
		if k.Key == "" {
			return nil, fmt.Errorf("api key %d is empty", i+1)
		}
		owner := k.Owner
		if owner == "" {
			owner = DefaultOwner
		}
		ring.keys[HashKey(k.Key)] = Principal{Owner: owner, Admin: k.Admin}
	}
	return ring, nil
}

// KeySetup is what LoadKeys needs.
type KeySetup struct {
	// EnvKey is BAY_API_KEY (or BAY_SECURITY__API_KEY) when set.
	EnvKey string
	// ConfigKey is the configured primary key (Bay's security.api_key).
	ConfigKey string
	// Extra keys are always accepted alongside the primary one.
	Extra []KeyConfig
	// DataDir receives credentials.json when a key is generated.
	DataDir string
	// Endpoint is written into credentials.json ("http://0.0.0.0:8114").
	Endpoint string
	Now      func() time.Time
}

// Credentials is Bay's credentials.json.
type Credentials struct {
	APIKey      string `json:"api_key"`
	Endpoint    string `json:"endpoint"`
	GeneratedAt string `json:"generated_at"`
}

// CredentialsFile is the name Bay (and AstrBot's discovery) uses.
const CredentialsFile = "credentials.json"

// LoadKeys picks the primary key the way Bay does: env, then config, then a key already stored, else it generates
// sk-bay-<64 hex>, stores its hash and writes credentials.json (mode 0600) into the data dir.
func LoadKeys(_ context.Context, st KeyStore, setup KeySetup) (*KeyRing, error) {
	if setup.Now == nil {
		setup.Now = time.Now
	}
	ring, err := NewKeyRing(setup.Extra)
	if err != nil {
		return nil, err
	}
	primary := Principal{Owner: DefaultOwner}
	switch {
	case setup.EnvKey != "":
		ring.keys[HashKey(setup.EnvKey)] = primary
		ring.Source = KeyFromEnv
		return ring, nil
	case setup.ConfigKey != "":
		ring.keys[HashKey(setup.ConfigKey)] = primary
		ring.Source = KeyFromConfig
		return ring, nil
	}
	stored, err := st.ActiveKeys()
	if err != nil {
		return nil, fmt.Errorf("reading stored api keys: %w", err)
	}
	if len(stored) > 0 {
		for _, k := range stored {
			ring.keys[k.Hash] = Principal{Owner: k.Owner, Admin: k.Admin}
		}
		ring.Source = KeyFromStore
		return ring, nil
	}
	key, err := generateKey()
	if err != nil {
		return nil, err
	}
	now := setup.Now().UTC()
	if err := writeCredentials(setup.DataDir, Credentials{
		APIKey: key, Endpoint: setup.Endpoint, GeneratedAt: now.Format(time.RFC3339Nano),
	}); err != nil {
		return nil, err
	}
	if err := st.PutKey(sandboxes.StoredKey{Hash: HashKey(key), Owner: DefaultOwner, Active: true, CreatedAt: now}); err != nil {
		return nil, fmt.Errorf("storing the generated api key: %w", err)
	}
	ring.keys[HashKey(key)] = primary
	ring.Source = KeyFromGenerated
	return ring, nil
}

func generateKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating an api key: %w", err)
	}
	return "sk-bay-" + hex.EncodeToString(b), nil
}

// writeCredentials writes credentials.json atomically with mode 0600.
func writeCredentials(dir string, c Credentials) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the data dir: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".credentials-*.json")
	if err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("writing credentials: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, CredentialsFile)); err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	return nil
}
