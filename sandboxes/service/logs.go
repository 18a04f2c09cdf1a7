package service

import (
	"context"

	"github.com/sandgate/sandgate/sandboxes"
)

// Logs reads the container output of a sandbox p may see, bounded by the Manager (sandboxes/logs.go).
func (s *Service) Logs(ctx context.Context, p Principal, id string, q sandboxes.LogQuery) ([]sandboxes.LogLine, error) {
	ls, ok := s.cfg.Sandboxes.(LogSource)
	if !ok {
		return nil, Errorf(CodeCapability, "sandbox output is not kept on this gateway").With("capability", "logs").With("available", []string{})
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		return nil, err
	}
	return ls.Logs(ctx, id, q)
}

// SetEgress replaces the own egress policy of a live sandbox p may see (nil: only its profile's); new
// connections through the egress proxy follow it at once (sandboxes.Manager.SetEgress).
func (s *Service) SetEgress(ctx context.Context, p Principal, id string, eg *sandboxes.SandboxEgress) (sandboxes.Sandbox, error) {
	es, ok := s.cfg.Sandboxes.(EgressSetter)
	if !ok {
		return sandboxes.Sandbox{}, Errorf(CodeCapability, "changing a sandbox's egress is not available on this gateway").With("capability", "egress").With("available", []string{})
	}
	if _, err := s.Unexpired(ctx, p, id); err != nil {
		return sandboxes.Sandbox{}, err
	}
	return deref(es.SetEgress(ctx, id, eg))
}
