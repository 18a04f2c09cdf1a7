package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
)

// The GC Lease: a coordination.k8s.io Lease, held through client-go's leaderelection, says which gateway of a
// fleet runs the collector's destructive parts. No consensus of ours: the API server's optimistic concurrency on
// the Lease object is the whole protocol. A gateway that closes releases the Lease at once (ReleaseOnCancel), so
// another takes it at its next retry; a killed one keeps it until LeaseDuration has passed without a renewal.

// leaseName is the GC Lease of a Manager's namespace.
func (s *StateStore) leaseName() string { return kubenames.Object(s.cfg.Manager) + "-gc" }

// elect runs the election until ctx (the Manager's) or the store ends, standing again after a lost lease.
func (s *StateStore) elect(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	context.AfterFunc(s.ctx, cancel)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: s.leaseName(), Namespace: s.cfg.Namespace},
		Client:     s.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true, Name: s.leaseName(),
			LeaseDuration: s.cfg.LeaseDuration, RenewDeadline: s.cfg.RenewDeadline, RetryPeriod: s.cfg.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { s.leading.Store(true) },
				OnStoppedLeading: func() { s.leading.Store(false) },
			},
		})
		if err != nil {
			return // the config is checked in NewStateStore; nothing here can be wrong at run time
		}
		le.Run(ctx)
		s.leading.Store(false)
	}
}

// defaultIdentity is the host name (a Pod's name in a Deployment) and a random suffix: two gateway processes on
// one host, and a restarted gateway, are distinct.
func defaultIdentity() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "gateway"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail on supported platforms
	return h + "-" + hex.EncodeToString(b)
}
