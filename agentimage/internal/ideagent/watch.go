package ideagent

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// maxBatchPaths is how many paths one fs/did_change carries before it says overflow instead.
	maxBatchPaths = 1000
	// maxWatchedDirs bounds inotify watches; a bigger tree is watched partially.
	maxWatchedDirs = 8192
)

// changeNotice is the params of an fs/did_change notification. Kinds is parallel to Paths.
type changeNotice struct {
	Seq      uint64   `json:"seq"`
	Paths    []string `json:"paths"`
	Kinds    []string `json:"kinds"`
	Overflow bool     `json:"overflow"`
}

// watcher turns inotify events under the workspace into debounced change notices for every /fs session.
type watcher struct {
	ws       *workspace
	debounce time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	subs    map[chan changeNotice]struct{}
	seq     uint64
	pending map[string]string // path -> kind
	over    bool
	watched int
}

func newWatcher(ws *workspace, debounce time.Duration, log *slog.Logger) *watcher {
	return &watcher{ws: ws, debounce: debounce, log: log, subs: map[chan changeNotice]struct{}{}, pending: map[string]string{}}
}

// subscribe returns a channel of notices; unsubscribe closes it.
func (w *watcher) subscribe() (<-chan changeNotice, func()) {
	ch := make(chan changeNotice, 64)
	w.mu.Lock()
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		if _, ok := w.subs[ch]; ok {
			delete(w.subs, ch)
			close(ch)
		}
		w.mu.Unlock()
	}
}

func (w *watcher) run(ctx context.Context) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.log.Warn("IDE agent: file watching unavailable", "error", err.Error())
		return
	}
	defer fw.Close()
	w.addTree(fw, w.ws.real, nil)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			kind := ""
			switch {
			case ev.Has(fsnotify.Create):
				kind = "create"
				if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
					// Whatever was created inside before the watch existed is reported too.
					w.addTree(fw, ev.Name, func(p string) {
						if p != ev.Name && !w.excluded(p) {
							w.note(w.ws.relOf(p), "create")
						}
					})
				}
			case ev.Has(fsnotify.Remove):
				kind = "remove"
			case ev.Has(fsnotify.Rename):
				kind = "rename"
			case ev.Has(fsnotify.Write):
				kind = "modify"
			default:
				continue // chmod
			}
			if w.excluded(ev.Name) {
				continue
			}
			w.note(w.ws.relOf(ev.Name), kind)
			if !armed {
				timer.Reset(w.debounce)
				armed = true
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			w.log.Warn("IDE agent: file watch error", "error", err.Error())
			w.mu.Lock()
			w.over = true
			w.mu.Unlock()
			if !armed {
				timer.Reset(w.debounce)
				armed = true
			}
		case <-timer.C:
			armed = false
			w.flush()
		}
	}
}

// excluded reports whether p is inside a directory the tree listing skips by default (node_modules, .git, ...).
func (w *watcher) excluded(p string) bool {
	for dir := filepath.Dir(p); len(dir) > len(w.ws.real); dir = filepath.Dir(dir) {
		for _, n := range defaultExcludeNames {
			if filepath.Base(dir) == n {
				return true
			}
		}
	}
	return false
}

// addTree watches root and the directories under it, calling found (when set) for every entry it meets.
func (w *watcher) addTree(fw *fsnotify.Watcher, root string, found func(path string)) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if found != nil {
			found(p)
		}
		if !d.IsDir() {
			return nil
		}
		if p != w.ws.real {
			for _, n := range defaultExcludeNames {
				if d.Name() == n {
					return filepath.SkipDir
				}
			}
		}
		w.mu.Lock()
		full := w.watched >= maxWatchedDirs
		if !full {
			w.watched++
		}
		w.mu.Unlock()
		if full {
			return filepath.SkipAll
		}
		if err := fw.Add(p); err != nil {
			w.log.Debug("IDE agent: cannot watch", "dir", p, "error", err.Error())
		}
		return nil
	})
}

func (w *watcher) note(rel, kind string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.pending[rel]; ok && prev == "create" && kind == "modify" {
		return // still new
	}
	w.pending[rel] = kind
	if len(w.pending) > maxBatchPaths {
		w.over = true
	}
}

func (w *watcher) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 && !w.over {
		return
	}
	w.seq++
	n := changeNotice{Seq: w.seq, Paths: []string{}, Kinds: []string{}, Overflow: w.over}
	if w.over {
		n.Kinds = []string{"overflow"}
	} else {
		paths := make([]string, 0, len(w.pending))
		for p := range w.pending {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			n.Paths = append(n.Paths, p)
			n.Kinds = append(n.Kinds, w.pending[p])
		}
	}
	w.pending, w.over = map[string]string{}, false
	for ch := range w.subs {
		select {
		case ch <- n:
		default: // a stalled client misses notices rather than stalling the others
		}
	}
}
