package sandboxes

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// DefaultDiskWarnRatio is the used fraction of a disk at which the gateway warns when the configuration does not
// say: 90% leaves room to act before the data dir's store refuses writes (CodeStorageFull) or the engine's layers
// and workspaces fill.
const DefaultDiskWarnRatio = 0.9

// DiskReading is one measurement of a watched filesystem.
type DiskReading struct {
	// Name is what the disk holds: "data" (the gateway's store) or "engine" (the engine's data root).
	Name, Path  string
	Free, Total uint64
	// Used is the used fraction, from 0 to 1, as df counts it (space reserved for root counts as used).
	Used float64
	// Over is Used at or past the warning ratio.
	Over bool
}

// DiskWatch measures the filesystems the gateway depends on and warns, in its log and on /metrics, before one
// fills: a warning when one crosses the ratio, a note when it drops back below. Safe for concurrent use.
type DiskWatch struct {
	ratio float64
	mu    sync.Mutex
	paths map[string]string
	last  map[string]DiskReading
}

// NewDiskWatch watches with warning ratio (0 or less: DefaultDiskWarnRatio).
func NewDiskWatch(ratio float64) *DiskWatch {
	if ratio <= 0 || ratio > 1 {
		ratio = DefaultDiskWarnRatio
	}
	return &DiskWatch{ratio: ratio, paths: map[string]string{}, last: map[string]DiskReading{}}
}

// Watch adds (or moves) the disk called name, holding path.
func (w *DiskWatch) Watch(name, path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paths[name] = path
}

// Check measures every watched disk, logs the crossings and returns the readings, by name.
func (w *DiskWatch) Check(log *slog.Logger) []DiskReading {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.measureLocked()
	for _, r := range out {
		prev, seen := w.last[r.Name]
		switch {
		case r.Over && (!seen || !prev.Over):
			log.Warn("a disk the gateway depends on is nearly full", "disk", r.Name, "path", r.Path,
				"used_percent", int(r.Used*100), "free_bytes", r.Free, "warn_percent", int(w.ratio*100))
		case !r.Over && seen && prev.Over:
			log.Info("a disk the gateway depends on has room again", "disk", r.Name, "path", r.Path, "used_percent", int(r.Used*100))
		}
		w.last[r.Name] = r
	}
	return out
}

// Measure returns the readings without logging (the metrics' scrape); Check keeps the warnings' state.
func (w *DiskWatch) Measure() []DiskReading {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.measureLocked()
}

// measureLocked leaves out a disk that cannot be measured (a path not on this host).
func (w *DiskWatch) measureLocked() []DiskReading {
	var out []DiskReading
	for name, path := range w.paths {
		free, total, err := DiskSpace(path)
		if err != nil || total == 0 {
			continue
		}
		r := DiskReading{Name: name, Path: path, Free: free, Total: total, Used: 1 - float64(free)/float64(total)}
		r.Over = r.Used >= w.ratio
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// EngineDataRoot is a Driver that can say where its engine keeps layers and volumes on this host (the docker
// driver: docker info's DockerRootDir, for an engine on a local socket).
type EngineDataRoot interface {
	DataRoot(ctx context.Context) (string, error)
}

// RunDiskWatch checks the disks every interval until ctx ends. engine, when not nil, is asked for the engine's
// data root until it answers, which is then watched as "engine".
func (w *DiskWatch) RunDiskWatch(ctx context.Context, interval time.Duration, engine EngineDataRoot, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if engine != nil {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			root, err := engine.DataRoot(actx)
			cancel()
			if err == nil && root != "" {
				w.Watch("engine", root)
				engine = nil
			}
		}
		w.Check(log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
