package sandboxes

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// HistorySource is what the reaper needs of the Manager: its events, and whether a sandbox still exists.
type HistorySource interface {
	Subscribe(buffer int) (<-chan Event, func())
	Get(ctx context.Context, id string) (*Sandbox, error)
}

// ReapHistory removes the execution history of deleted sandboxes, and expired exports and those of deleted
// sandboxes (store_exports.go), until ctx ends. Every deletion path of the core
// (API or console delete, admin delete, TTL expiry, orphan sweep) ends in one "deleted" event, so that event is the
// hook; a sweep every interval drops the history of any sandbox the core no longer knows, which covers events a slow
// subscriber lost and deletions made while the gateway was down. There is no sweep at start: the reaper may start
// before the Manager has loaded its sandboxes, when every sandbox would look deleted.
func (s *BoltStore) ReapHistory(ctx context.Context, src HistorySource, interval time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	events, cancel := src.Subscribe(256)
	defer cancel()
	sweep := time.NewTicker(interval)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type == EventDeleted && ev.SandboxID != "" {
				if err := s.DropHistory(ev.SandboxID); err != nil {
					log.Warn("removing a deleted sandbox's history", "sandbox", ev.SandboxID, "error", err)
				}
				// Delete drops them with the record; a Manager whose records live elsewhere (the Kubernetes state
				// store) deletes its record there, so they go here.
				if err := s.DropExports(ev.SandboxID); err != nil {
					log.Warn("removing a deleted sandbox's exports", "sandbox", ev.SandboxID, "error", err)
				}
			}
		case <-sweep.C:
			s.sweepHistory(ctx, src, log)
			s.sweepExports(ctx, src, log)
		}
	}
}

func (s *BoltStore) sweepHistory(ctx context.Context, src HistorySource, log *slog.Logger) {
	ids, err := s.HistorySandboxes()
	if err != nil {
		log.Warn("listing stored history", "error", err)
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		_, err := src.Get(ctx, id)
		var se *Error
		if !errors.As(err, &se) || se.Code != CodeNotFound {
			continue // alive, or the core could not say: keep it
		}
		if err := s.DropHistory(id); err != nil {
			log.Warn("removing a deleted sandbox's history", "sandbox", id, "error", err)
		}
	}
}

// sweepExports is the exports' share of the sweep: a sandbox the core does not know (CodeNotFound) loses its
// registrations, as do registrations past their expiry (ExportLimits.TTL).
func (s *BoltStore) sweepExports(ctx context.Context, src HistorySource, log *slog.Logger) {
	n, err := s.SweepExports(time.Now(), func(id string) bool {
		if ctx.Err() != nil {
			return true
		}
		_, err := src.Get(ctx, id)
		var se *Error
		return !errors.As(err, &se) || se.Code != CodeNotFound
	})
	if err != nil {
		log.Warn("sweeping exports", "error", err)
		return
	}
	if n > 0 {
		log.Info("removed expired exports and those of deleted sandboxes", "count", n)
	}
}
