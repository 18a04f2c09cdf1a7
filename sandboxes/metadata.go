package sandboxes

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// Metadata is a sandbox's tenant-given key/value labels (OpenSandbox's `metadata`): stored on the Record, so it
// survives restarts with the sandbox, and matched in memory by List. The Manager owns it; API dialects only read
// and patch it through these methods.

// Metadata bounds: they keep one tenant's labels from growing the store and every List without limit.
const (
	MaxMetadataEntries    = 64
	MaxMetadataKeyBytes   = 253
	MaxMetadataValueBytes = 1024
)

// ValidateMetadata checks keys and values against the bounds above.
func ValidateMetadata(md map[string]string) error {
	if len(md) > MaxMetadataEntries {
		return Errorf(CodeInvalid, "metadata has %d entries, the limit is %d", len(md), MaxMetadataEntries)
	}
	for k, v := range md {
		if err := validMetadataKey(k); err != nil {
			return err
		}
		if len(v) > MaxMetadataValueBytes || !utf8.ValidString(v) {
			return Errorf(CodeInvalid, "metadata %q: a value is valid UTF-8 of at most %d bytes", k, MaxMetadataValueBytes)
		}
	}
	return nil
}

func validMetadataKey(k string) error {
	if k == "" || len(k) > MaxMetadataKeyBytes || !utf8.ValidString(k) {
		return Errorf(CodeInvalid, "metadata key %q: a key is 1 to %d bytes of UTF-8", k, MaxMetadataKeyBytes)
	}
	for _, c := range k {
		if c < 0x20 || c == 0x7f || c == '=' || c == '&' {
			return Errorf(CodeInvalid, "metadata key %q: control characters, '=' and '&' are not allowed", k)
		}
	}
	return nil
}

// matchesMetadata reports whether md holds every pair of want.
func matchesMetadata(md, want map[string]string) bool {
	for k, v := range want {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// PatchMetadata applies a JSON merge patch (RFC 7396) to a sandbox's metadata: a nil value deletes its key, any
// other value adds or replaces it. The result is checked against the bounds before anything changes.
func (m *Manager) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*Sandbox, error) {
	now := m.clock()
	m.mu.Lock()
	e, err := m.liveLocked(id, now)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	next := maps.Clone(e.rec.Metadata)
	if next == nil {
		next = map[string]string{}
	}
	for k, v := range patch {
		if v == nil {
			delete(next, k)
			continue
		}
		next[k] = *v
	}
	if err := ValidateMetadata(next); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if len(next) == 0 {
		next = nil
	}
	e.rec.Metadata = next
	sb := m.snapshotLocked(e, now)
	m.mu.Unlock()
	m.persist(e)
	return sb, nil
}

// AccessKey is a stable, unguessable credential for one purpose on one sandbox: an HMAC of purpose and id under the
// sandbox's own agent token, which never leaves the gateway. An API dialect hands it out (OpenSandbox endpoints carry
// it) and checks it with hmac.Equal; it is valid exactly as long as the sandbox exists, and needs no storage.
func (m *Manager) AccessKey(id, purpose string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, err := m.visibleLocked(id)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, []byte(e.rec.Token))
	fmt.Fprintf(mac, "%s\x00%s", purpose, id)
	return hex.EncodeToString(mac.Sum(nil)[:16]), nil
}

// SandboxEgress is a sandbox's own outbound policy (OpenSandbox's networkPolicy), applied by the gateway's egress
// proxy inside its profile's allow-list: it narrows what the profile lets the sandbox reach, never widens it. Only a
// profile whose sandboxes reach outside through that proxy alone (network internal with egress.proxy set) can
// carry one.
type SandboxEgress struct {
	// Allow lists host names, *.domains and public addresses; with AllowAnyName it is not read.
	Allow []string `json:"allow,omitempty"`
	// Deny lists host names and *.domains refused first.
	Deny []string `json:"deny,omitempty"`
	// AllowAnyName admits every name not denied (default allow).
	AllowAnyName bool `json:"allow_any_name,omitempty"`
}

// EgressEnforced reports whether every outbound connection of p's sandboxes goes through the gateway's egress
// proxy, so a SandboxEgress on one of them is enforced.
func (p *Profile) EgressEnforced() bool {
	return (p.Network == "" || p.Network == NetworkInternal) && p.Egress != nil && p.Egress.Proxy != ""
}

func cloneEgress(e *SandboxEgress) *SandboxEgress {
	if e == nil {
		return nil
	}
	return &SandboxEgress{Allow: slices.Clone(e.Allow), Deny: slices.Clone(e.Deny), AllowAnyName: e.AllowAnyName}
}

// SetEgress replaces a live sandbox's own outbound policy (nil: its profile's alone). The egress proxy reads the
// policy at each new connection (BySource), so it applies to the next one; a tunnel already open keeps going until
// it closes. Only a profile whose sandboxes reach outside through that proxy alone can carry one, as at create.
func (m *Manager) SetEgress(ctx context.Context, id string, eg *SandboxEgress) (*Sandbox, error) {
	now := m.clock()
	m.mu.Lock()
	e, err := m.liveLocked(id, now)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if eg != nil && !e.profile.EgressEnforced() {
		m.mu.Unlock()
		return nil, Errorf(CodeInvalid, "profile %q does not send its sandboxes' traffic through the egress proxy alone (network internal with egress.proxy): a sandbox egress policy cannot be enforced", e.rec.Profile)
	}
	e.rec.Egress = cloneEgress(eg)
	sb := m.snapshotLocked(e, now)
	m.mu.Unlock()
	if err := m.persist(e); err != nil {
		return nil, err
	}
	return sb, nil
}
