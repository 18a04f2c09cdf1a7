package service

import (
	"context"
	"fmt"

	"github.com/sandgate/sandgate/sandboxes"
)

// The collection an operator asks for now (Bay's POST /v1/admin/gc/run): the Manager's own collector (sandboxes/gc.go)
// run through the one road, for admins only. A tenant could otherwise stop every idle sandbox of every owner at will.

// collector is what the Manager offers beyond the lifecycle to run a collection now (*sandboxes.Manager.RunGC).
type collector interface {
	RunGC(ctx context.Context) (sandboxes.GCReport, error)
}

// CollectGarbage runs one collection now and reports what it did (admin only). Collections run one at a time: a
// call made during another waits for it and then runs its own.
func (s *Service) CollectGarbage(ctx context.Context, p Principal) (sandboxes.GCReport, error) {
	if !p.Admin {
		return sandboxes.GCReport{}, Errorf(CodeForbidden, "garbage collection needs an admin key")
	}
	c, ok := s.cfg.Sandboxes.(collector)
	if !ok {
		return sandboxes.GCReport{}, Errorf(CodeCapability, "garbage collection on demand is not available on this gateway").
			With("capability", "gc").With("available", []string{})
	}
	rep, err := c.RunGC(ctx)
	if err != nil {
		return rep, fmt.Errorf("running garbage collection: %w", err)
	}
	return rep, nil
}

// gcStater is what the Manager offers to report its collector (*sandboxes.Manager.GCState).
type gcStater interface {
	GCState() sandboxes.GCState
}

// GCStatus reports the collector's settings and whether a collection runs now (admin only: it names the
// gateway's instance and collection rhythm, which tenants have no use for).
func (s *Service) GCStatus(ctx context.Context, p Principal) (sandboxes.GCState, error) {
	if !p.Admin {
		return sandboxes.GCState{}, Errorf(CodeForbidden, "garbage collection status needs an admin key")
	}
	c, ok := s.cfg.Sandboxes.(gcStater)
	if !ok {
		return sandboxes.GCState{}, Errorf(CodeCapability, "garbage collection status is not available on this gateway").
			With("capability", "gc").With("available", []string{})
	}
	return c.GCState(), nil
}
