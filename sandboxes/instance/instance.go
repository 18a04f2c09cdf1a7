// Package instance opens what one gateway runs over one engine and label namespace, and closes it as one: the
// Manager, the one store (a bbolt file), the Manager's metrics, and the loops that keep the store (the history
// reaper, backups, the disk watch). The gateway (caddymodule's App) pools one Instance per engine and namespace
// across config reloads; the last config that uses it closes it.
package instance

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/metrics"
)

// Config is what Open needs. It does no I/O.
type Config struct {
	// Path is the store's file, <data dir>/sandgate/<namespace>.db for the gateway.
	Path string
	// Namespace prefixes the labels, volume and network names of the Manager's containers.
	Namespace string
	// Driver is the engine client, which the Instance owns from here on (closed with the Manager).
	Driver sandboxes.Driver
	// Records, when set, gives the store the Manager keeps its sandbox records in (the kubernetes driver's `state
	// kubernetes`), over local, which keeps everything else. Nil: local keeps the records too.
	Records func(local *sandboxes.BoltStore) (sandboxes.Store, error)
	// Store is the store's backups and disk warnings: the first config's settings hold while the Instance lives.
	Store  sandboxes.StoreSettings
	Logger *slog.Logger
}

// Instance is one Manager with its store, metrics and loops.
type Instance struct {
	Manager *sandboxes.Manager
	// Store is the one store of everything the gateway persists (the APIs' keys, history and exports too).
	Store   *sandboxes.BoltStore
	Metrics *metrics.Metrics
	// Started is when a gateway config using this Instance last started (unix nanoseconds; 0: never, or closed),
	// so the admin endpoint finds the current one.
	Started atomic.Int64
	// stops end the background loops, in order, before the Manager closes.
	stops []func()
}

// Open builds the Manager over cfg.Driver and starts the metrics' and the store's loops. The Manager itself is
// not started (Manager.Start does that, with I/O). When Open fails it has closed what it was given to own: the
// driver, and the records store cfg.Records made.
func Open(cfg Config) (*Instance, error) {
	if cfg.Driver == nil {
		return nil, errors.New("opening a sandbox instance: no driver")
	}
	store := sandboxes.NewBoltStore(cfg.Path)
	var records sandboxes.Store = store
	if cfg.Records != nil {
		var err error
		if records, err = cfg.Records(store); err != nil {
			return nil, errors.Join(fmt.Errorf("opening the sandbox records' store: %w", err), cfg.Driver.Close(), store.Close())
		}
	}
	mgr, err := sandboxes.NewManager(sandboxes.ManagerConfig{Namespace: cfg.Namespace}, cfg.Driver, records, cfg.Logger)
	if err != nil {
		err = fmt.Errorf("building the sandbox manager: %w", err)
		if records != sandboxes.Store(store) {
			err = errors.Join(err, records.Close())
		}
		return nil, errors.Join(err, cfg.Driver.Close(), store.Close())
	}
	disks := sandboxes.NewDiskWatch(cfg.Store.DiskWarnRatio)
	in := &Instance{Manager: mgr, Store: store, Metrics: metrics.New(mgr, disks)}
	in.stops = []func(){
		in.Metrics.Follow(),
		sandboxes.StartHistoryReaper(store, mgr, cfg.Logger),
		sandboxes.StartStoreLoops(store, cfg.Driver, cfg.Store.BackupInterval, cfg.Store.BackupKeep, disks, cfg.Logger),
	}
	return in, nil
}

// Close stops the loops and closes the Manager (its store and driver too). Containers stay.
func (in *Instance) Close() error {
	in.Started.Store(0)
	for _, stop := range in.stops {
		stop()
	}
	return in.Manager.Close()
}
