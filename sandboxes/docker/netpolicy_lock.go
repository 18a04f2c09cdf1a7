package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// hostLockPath serialises packet-filter changes across every gateway process on the host. iptables' own -w lock
// holds only for the legacy backend; under iptables-nft two processes changing rules at once can fail each other's
// commands ("Bad rule", "Resource temporarily unavailable"), and more than one gateway (or a test suite's many) may
// share a host. A lock file of our own, not /run/xtables.lock: iptables-legacy takes that one itself, so holding it
// around an iptables call would wait on ourselves.
const hostLockPath = "/run/sandgate/packetfilter.lock"

// lockHost takes the host-wide packet-filter lock, polling so ctx can cancel the wait. It returns the release
// function. When the lock file cannot be created (a host without /run, an unprivileged test), changes are serialised
// within this process only: iptables itself needs the privileges the lock file does.
func lockHost(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}, nil
	}
	delay := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			_ = f.Close()
			return nil, fmt.Errorf("%w: locking %s: %v", ErrPacketFilter, path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("%w: waiting for another process's packet-filter change: %v", ErrPacketFilter, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}
