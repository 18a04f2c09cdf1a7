package sandboxes

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"
)

// The loops that keep the gateway's store for as long as its Manager lives; the gateway's instance
// (sandboxes/instance) starts them once and stops them when the last config using the Manager is unloaded.

// StartHistoryReaper runs the store's history reaper (ReapHistory) with src's events; the returned function stops it
// and waits for it.
func StartHistoryReaper(store *BoltStore, src HistorySource, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.ReapHistory(ctx, src, 10*time.Minute, log)
	}()
	return func() {
		cancel()
		<-done
	}
}

// StartStoreLoops backs the store up every interval, keeping keep backups (RunBackups), and watches the data dir's
// and the engine's disks (RunDiskWatch); the returned function stops both and waits for them.
func StartStoreLoops(store *BoltStore, drv Driver, interval time.Duration, keep int, disks *DiskWatch, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		store.RunBackups(ctx, interval, keep, log)
	}()
	disks.Watch("data", filepath.Dir(store.Path()))
	engine, _ := drv.(EngineDataRoot)
	go func() {
		defer func() { done <- struct{}{} }()
		disks.RunDiskWatch(ctx, time.Minute, engine, log)
	}()
	return func() {
		cancel()
		<-done
		<-done
	}
}
