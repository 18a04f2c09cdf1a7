package service

import (
	"context"

	"github.com/sandgate/sandgate/sandboxes"
)

// The operator's view (Caddy's admin endpoint, routes/admin): every owner's sandboxes as the Manager has them,
// through the same road as every dialect. Each call takes the caller's Principal and refuses one that is not an
// admin with forbidden, so no tenant reaches it through a dialect that hands it a principal by mistake.

// OperatorPrincipal is the gateway operator's principal: an admin that owns nothing.
func OperatorPrincipal() Principal { return Principal{Owner: "", Admin: true} }

// operatorView is what the operator reads of the Manager beyond the lifecycle (*sandboxes.Manager).
type operatorView interface {
	Stats() map[string]int
	WarmPools() (pools []sandboxes.PoolStats, refillConcurrency int)
	WarmImagePools() []sandboxes.ImagePoolStats
	Resolve(id string) (sandboxes.Target, bool)
}

func (s *Service) operator(p Principal) (operatorView, error) {
	if !p.Admin {
		return nil, Errorf(CodeForbidden, "the operator's view needs an admin principal")
	}
	o, ok := s.cfg.Sandboxes.(operatorView)
	if !ok {
		return nil, Errorf(CodeCapability, "the operator's view is not available on this gateway").With("capability", "operator").With("available", []string{})
	}
	return o, nil
}

// ListAll lists one page of sandboxes with the Manager's own statuses (no client mapping of starting and idle, as
// ListSandboxes makes); an admin's opts.Owner filters by owner, anyone else sees only their own.
func (s *Service) ListAll(ctx context.Context, p Principal, opts sandboxes.ListOptions) ([]*sandboxes.Sandbox, string, error) {
	if !p.Admin {
		opts.Owner = p.Owner
	}
	return s.cfg.Sandboxes.List(ctx, opts)
}

// Stats counts sandboxes by status (admin only).
func (s *Service) Stats(p Principal) (map[string]int, error) {
	o, err := s.operator(p)
	if err != nil {
		return nil, err
	}
	return o.Stats(), nil
}

// WarmPools reports the warm pools and the refill concurrency (admin only).
func (s *Service) WarmPools(p Principal) ([]sandboxes.PoolStats, int, error) {
	o, err := s.operator(p)
	if err != nil {
		return nil, 0, err
	}
	pools, conc := o.WarmPools()
	return pools, conc, nil
}

// WarmImagePools reports the warm pools by image (warm_images; admin only).
func (s *Service) WarmImagePools(p Principal) ([]sandboxes.ImagePoolStats, error) {
	o, err := s.operator(p)
	if err != nil {
		return nil, err
	}
	return o.WarmImagePools(), nil
}

// AgentAccess is how to reach a running sandbox's agent directly, token included (admin only: the operator's
// debugging endpoint); false when it is not running.
func (s *Service) AgentAccess(p Principal, id string) (sandboxes.Target, bool, error) {
	o, err := s.operator(p)
	if err != nil {
		return sandboxes.Target{}, false, err
	}
	t, ok := o.Resolve(id)
	return t, ok, nil
}

// ForkAs forks a sandbox p may see with the core's request as it is (the operator's fork: TTL 0 is the Manager's
// default), answering the Manager's result.
func (s *Service) ForkAs(ctx context.Context, p Principal, id string, req sandboxes.ForkRequest) (*sandboxes.ForkResult, error) {
	sn, err := s.snapshotter()
	if err != nil {
		return nil, err
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		return nil, err
	}
	return sn.Fork(ctx, id, req)
}
