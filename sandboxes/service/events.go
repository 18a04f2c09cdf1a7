package service

import (
	"context"

	"github.com/sandgate/sandgate/sandboxes"
)

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
