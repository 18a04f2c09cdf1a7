package opensandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// fakeSandboxes is the Manager's behaviour the dialect relies on, in memory.
type fakeSandboxes struct {
	// The Manager's methods this dialect never reaches through the service (workspaces, Bay's Hold, stop) are left
	// unimplemented: calling one panics the test.
	service.Sandboxes
	mu       sync.Mutex
	n        int
	sbs      map[string]*sandboxes.Sandbox
	creates  []sandboxes.CreateRequest
	agent    string // agent address every sandbox answers on
	profiles []sandboxes.Profile
}

func newFake(agent string) *fakeSandboxes {
	return &fakeSandboxes{sbs: map[string]*sandboxes.Sandbox{}, agent: agent, profiles: []sandboxes.Profile{
		{ID: "base", Image: "sandgate/sandbox:base", Network: sandboxes.NetworkInternal, Resources: sandboxes.Resources{CPUs: 2, Memory: "4g"}},
		{ID: "sealed", Image: "sandgate/sandbox:sealed", Network: sandboxes.NetworkNone},
		{ID: "web", Image: "sandgate/sandbox:web", Network: sandboxes.NetworkBridge},
		{ID: "proxied", Image: "sandgate/sandbox:proxied", Network: sandboxes.NetworkInternal,
			Egress: &sandboxes.Egress{Proxy: "http://10.0.0.1:3128", Allow: []string{"pypi.org", "*.example.com"}}},
		{ID: "anyimage", Image: "sandgate/sandbox:anyimage", Network: sandboxes.NetworkInternal, Resources: sandboxes.Resources{CPUs: 2, Memory: "4g"},
			AllowedImages: []string{"fastgpt-agent-sandbox:*", "registry.example/team/*:*"}},
	}}
}

func (f *fakeSandboxes) Create(_ context.Context, req sandboxes.CreateRequest) (*sandboxes.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := sandboxes.ValidateMetadata(req.Metadata); err != nil {
		return nil, err
	}
	// The core's own checks of a caller's image and limits (pure functions of the profile).
	var prof sandboxes.Profile
	for _, p := range f.profiles {
		if p.ID == req.Profile {
			prof = p
		}
	}
	if req.Image != nil {
		derived, err := prof.WithImage(*req.Image)
		if err != nil {
			return nil, err
		}
		prof = derived
	}
	if req.Resources != (sandboxes.Resources{}) {
		if _, err := prof.WithResources(req.Resources); err != nil {
			return nil, err
		}
	}
	f.n++
	f.creates = append(f.creates, req)
	now := time.Date(2026, 1, 1, 0, 0, f.n, 0, time.UTC)
	sb := &sandboxes.Sandbox{ID: fmt.Sprintf("sandbox-%012x", f.n), Profile: req.Profile, Owner: req.Owner,
		Status: sandboxes.StatusStarting, CreatedAt: now, Metadata: maps.Clone(req.Metadata)}
	if req.TTL > 0 {
		t := time.Now().Add(req.TTL)
		sb.ExpiresAt = &t
	}
	f.sbs[sb.ID] = sb
	c := *sb
	return &c, nil
}

func (f *fakeSandboxes) set(id string, st sandboxes.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sbs[id].Status = st
}

func (f *fakeSandboxes) Get(_ context.Context, id string) (*sandboxes.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.sbs[id]
	if sb == nil {
		return nil, sandboxes.Errorf(sandboxes.CodeNotFound, "sandbox %s not found", id)
	}
	c := *sb
	c.Metadata = maps.Clone(sb.Metadata)
	return &c, nil
}

func (f *fakeSandboxes) List(_ context.Context, opts sandboxes.ListOptions) ([]*sandboxes.Sandbox, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sandboxes.Sandbox
	for _, sb := range f.sbs {
		if opts.Owner != "" && sb.Owner != opts.Owner {
			continue
		}
		ok := true
		for k, v := range opts.Metadata {
			if sb.Metadata[k] != v {
				ok = false
			}
		}
		if ok {
			c := *sb
			out = append(out, &c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, "", nil
}

func (f *fakeSandboxes) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sbs, id)
	return nil
}

func (f *fakeSandboxes) PatchMetadata(_ context.Context, id string, patch map[string]*string) (*sandboxes.Sandbox, error) {
	f.mu.Lock()
	sb := f.sbs[id]
	for k, v := range patch {
		if v == nil {
			delete(sb.Metadata, k)
		} else {
			sb.Metadata[k] = *v
		}
	}
	f.mu.Unlock()
	return f.Get(context.Background(), id)
}

func (f *fakeSandboxes) Pause(ctx context.Context, id string) (*sandboxes.Sandbox, error) {
	f.set(id, sandboxes.StatusPaused)
	return f.Get(ctx, id)
}

func (f *fakeSandboxes) Resume(ctx context.Context, id string) (*sandboxes.Sandbox, error) {
	f.set(id, sandboxes.StatusReady)
	return f.Get(ctx, id)
}

func (f *fakeSandboxes) ExtendTTL(ctx context.Context, id string, by time.Duration) (*sandboxes.Sandbox, error) {
	f.mu.Lock()
	t := f.sbs[id].ExpiresAt.Add(by)
	f.sbs[id].ExpiresAt = &t
	f.mu.Unlock()
	return f.Get(ctx, id)
}

func (f *fakeSandboxes) EnsureRunning(ctx context.Context, id string) (sandboxes.Target, error) {
	if _, err := f.Get(ctx, id); err != nil {
		return sandboxes.Target{}, err
	}
	return sandboxes.Target{SandboxID: id, Addr: f.agent, Token: "agent-token-" + id}, nil
}

func (f *fakeSandboxes) Acquire(id string) (func(), error) { return func() {}, nil }

func (f *fakeSandboxes) AccessKey(id, purpose string) (string, error) {
	if _, err := f.Get(context.Background(), id); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(purpose + "\x00" + id))
	return hex.EncodeToString(sum[:16]), nil
}

func (f *fakeSandboxes) Profiles() []sandboxes.Profile { return f.profiles }

type fakeKeys map[string]service.Principal

func (k fakeKeys) Lookup(key string) (service.Principal, bool) { p, ok := k[key]; return p, ok }
