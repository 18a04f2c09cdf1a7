package service

import (
	"context"
	"crypto/subtle"

	"github.com/sandgate/sandgate/sandboxes"
)

// The lifecycle operations of the dialects that speak the core's own create request (OpenSandbox, the console):
// the same owner rule and the same Manager calls as Bay's, without Bay's defaults.

// Create creates a sandbox owned by p from the core's request as it is (its Owner is p's whatever it says).
func (s *Service) Create(ctx context.Context, p Principal, req sandboxes.CreateRequest) (sandboxes.Sandbox, error) {
	req.Owner = p.Owner
	return deref(s.cfg.Sandboxes.Create(ctx, req))
}

// PatchMetadata merges patch into the tenant metadata of a sandbox p may see (a nil value deletes a key).
func (s *Service) PatchMetadata(ctx context.Context, p Principal, id string, patch map[string]*string) (sandboxes.Sandbox, error) {
	mp, ok := s.cfg.Sandboxes.(MetadataPatcher)
	if !ok {
		return sandboxes.Sandbox{}, Errorf(CodeCapability, "metadata is not kept on this gateway").With("capability", "metadata").With("available", []string{})
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		return sandboxes.Sandbox{}, err
	}
	return deref(mp.PatchMetadata(ctx, id, patch))
}

func (s *Service) accessKeyer() (AccessKeyer, error) {
	ak, ok := s.cfg.Sandboxes.(AccessKeyer)
	if !ok {
		return nil, Errorf(CodeCapability, "access keys are not available on this gateway").With("capability", "access_keys").With("available", []string{})
	}
	return ak, nil
}

// AccessKey is the key for purpose of a sandbox p may see: an HMAC under the sandbox's own agent token, valid while
// the sandbox exists (sandboxes.Manager.AccessKey).
func (s *Service) AccessKey(ctx context.Context, p Principal, id, purpose string) (string, error) {
	ak, err := s.accessKeyer()
	if err != nil {
		return "", err
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		return "", err
	}
	return ak.AccessKey(id, purpose)
}

// AccessKeyValid says, in constant time, whether key is the sandbox's key for purpose: the credential of a caller
// that has no principal (a URL handed out by AccessKey). A missing sandbox has no valid key.
func (s *Service) AccessKeyValid(id, purpose, key string) bool {
	ak, err := s.accessKeyer()
	if err != nil || key == "" {
		return false
	}
	want, err := ak.AccessKey(id, purpose)
	return err == nil && subtle.ConstantTimeCompare([]byte(key), []byte(want)) == 1
}

// Subscribe streams the lifecycle events p may see (no warm-pool sandbox, no other owner's) until cancel is called
// or the Manager closes; buffer bounds what a slow reader may fall behind by. Without a Subscriber the stream is
// closed at once.
func (s *Service) Subscribe(p Principal, buffer int) (<-chan sandboxes.Event, func()) {
	sub, ok := s.cfg.Sandboxes.(Subscriber)
	if !ok {
		ch := make(chan sandboxes.Event)
		close(ch)
		return ch, func() {}
	}
	in, cancel := sub.Subscribe(buffer)
	out := make(chan sandboxes.Event, max(buffer, 1))
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Warm || !p.Sees(ev.Owner) {
				continue
			}
			select {
			case out <- ev:
			default: // a reader this far behind misses events, as the Manager's own subscribers do
			}
		}
	}()
	return out, cancel
}

// Usage reports the CPU and memory of running sandboxes by id (nil without a UsageSource); ids it knows nothing
// about are absent. The caller passes ids of sandboxes it listed through the service.
func (s *Service) Usage(ctx context.Context, ids []string) map[string]sandboxes.Usage {
	u, ok := s.cfg.Sandboxes.(UsageSource)
	if !ok {
		return nil
	}
	return u.Usage(ctx, ids)
}
