package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

const (
	// maxWatches bounds concurrent watches (WatchDir streams and polled watchers); each holds an inotify instance.
	maxWatches = 64
	// maxWatchedDirs bounds the directories one recursive watch adds; deeper trees are watched partially.
	maxWatchedDirs = 4096
	// maxPendingEvents bounds the events waiting for a slow stream or an unpolled watcher; beyond it new events
	// are dropped.
	maxPendingEvents = 10_000
	// watcherIdle is how long a polled watcher lives without GetWatcherEvents.
	watcherIdle = 10 * time.Minute
)

// dirWatch turns inotify events under one directory into E2B's filesystem events.
type dirWatch struct {
	s            *Service
	w            *fsnotify.Watcher
	base         string
	recursive    bool
	includeEntry bool
	dirs         int

	mu      sync.Mutex
	pending []*pb.FilesystemEvent
	notify  chan struct{} // gets a token when pending grows
	done    chan struct{}
	once    sync.Once
}

// watchTarget checks a watch request's path: an existing directory in the workspace.
func (s *Service) watchTarget(p string) (string, error) {
	real, err := s.paths.resolve(p)
	if err != nil {
		return "", connect.NewError(fsCode(err), err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", notFoundOr(p, err)
	}
	if !fi.IsDir() {
		return "", invalidArg("path '%s' is not a directory", p)
	}
	return real, nil
}

func (s *Service) newDirWatch(real string, recursive, includeEntry bool) (*dirWatch, error) {
	if !s.watchers.acquire() {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d directory watches are open; remove one first", maxWatches))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.watchers.release()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watching: %w", err))
	}
	dw := &dirWatch{s: s, w: w, base: real, recursive: recursive, includeEntry: includeEntry,
		notify: make(chan struct{}, 1), done: make(chan struct{})}
	if err := dw.add(real); err != nil {
		dw.close()
		return nil, connect.NewError(fsCode(err), fmt.Errorf("watching '%s': %w", s.paths.external(real), err))
	}
	if recursive {
		_ = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || p == real {
				return nil
			}
			if dw.add(p) != nil {
				return filepath.SkipAll
			}
			return nil
		})
	}
	go dw.run()
	return dw, nil
}

func (dw *dirWatch) add(dir string) error {
	if dw.dirs >= maxWatchedDirs {
		return errors.New("too many directories")
	}
	if err := dw.w.Add(dir); err != nil {
		return err
	}
	dw.dirs++
	return nil
}

func (dw *dirWatch) close() {
	dw.once.Do(func() {
		close(dw.done)
		_ = dw.w.Close()
		dw.s.watchers.release()
	})
}

func (dw *dirWatch) run() {
	for {
		select {
		case <-dw.done:
			return
		case err, ok := <-dw.w.Errors:
			if !ok {
				return
			}
			dw.s.d.Logger.Debug("envd watch", "error", err)
		case ev, ok := <-dw.w.Events:
			if !ok {
				return
			}
			dw.handle(ev)
		}
	}
}

// handle converts one inotify event (one fsnotify op may carry several) and follows new directories.
func (dw *dirWatch) handle(ev fsnotify.Event) {
	rel, err := filepath.Rel(dw.base, ev.Name)
	if err != nil || rel == "." {
		return
	}
	if dw.recursive && ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			_ = dw.add(ev.Name) // over the bound, the new directory is not watched
		}
	}
	ops := []struct {
		op fsnotify.Op
		t  pb.EventType
	}{
		{fsnotify.Create, pb.EventType_EVENT_TYPE_CREATE}, {fsnotify.Write, pb.EventType_EVENT_TYPE_WRITE},
		{fsnotify.Remove, pb.EventType_EVENT_TYPE_REMOVE}, {fsnotify.Rename, pb.EventType_EVENT_TYPE_RENAME},
		{fsnotify.Chmod, pb.EventType_EVENT_TYPE_CHMOD},
	}
	for _, o := range ops {
		if !ev.Has(o.op) {
			continue
		}
		fe := &pb.FilesystemEvent{Name: filepath.ToSlash(rel), Type: o.t}
		if dw.includeEntry && o.t != pb.EventType_EVENT_TYPE_REMOVE && o.t != pb.EventType_EVENT_TYPE_RENAME {
			if e, err := dw.s.entryInfo(ev.Name); err == nil {
				fe.Entry = e
			}
		}
		dw.push(fe)
	}
}

func (dw *dirWatch) push(fe *pb.FilesystemEvent) {
	dw.mu.Lock()
	if len(dw.pending) < maxPendingEvents {
		dw.pending = append(dw.pending, fe)
	}
	dw.mu.Unlock()
	select {
	case dw.notify <- struct{}{}:
	default:
	}
}

func (dw *dirWatch) drain() []*pb.FilesystemEvent {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	out := dw.pending
	dw.pending = nil
	return out
}

// WatchDir streams a directory's events: start first, then filesystem events and keepalives, until the client
// leaves or its deadline (Connect-Timeout-Ms) passes.
func (f *fsService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	if err := f.s.authorize(req.Header()); err != nil {
		return err
	}
	real, err := f.s.watchTarget(req.Msg.GetPath())
	if err != nil {
		return err
	}
	dw, err := f.s.newDirWatch(real, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer dw.close()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keepalive := keepaliveInterval(req.Header())
	ka := time.NewTimer(keepalive)
	defer ka.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-dw.notify:
			for _, fe := range dw.drain() {
				if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
					return err
				}
			}
			ka.Reset(keepalive)
		case <-ka.C:
			if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
			ka.Reset(keepalive)
		}
	}
}

// CreateWatcher starts a polled watch (the Python sync SDK's watchDir); it ends with RemoveWatcher or after
// watcherIdle without GetWatcherEvents.
func (f *fsService) CreateWatcher(_ context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	real, err := f.s.watchTarget(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	dw, err := f.s.newDirWatch(real, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	id := f.s.watchers.put(dw, f.s.d.Now)
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

func (f *fsService) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	dw, ok := f.s.watchers.get(req.Msg.GetWatcherId(), f.s.d.Now)
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher '%s' not found", req.Msg.GetWatcherId()))
	}
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: dw.drain()}), nil
}

func (f *fsService) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	if !f.s.watchers.remove(req.Msg.GetWatcherId()) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher '%s' not found", req.Msg.GetWatcherId()))
	}
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}

// watcherTable holds the polled watchers and counts every open watch against maxWatches.
type watcherTable struct {
	mu    sync.Mutex
	open  int
	polls map[string]*polled
}

type polled struct {
	dw   *dirWatch
	last time.Time
}

func newWatcherTable() *watcherTable { return &watcherTable{polls: map[string]*polled{}} }

func (t *watcherTable) acquire() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open >= maxWatches {
		return false
	}
	t.open++
	return true
}

func (t *watcherTable) release() {
	t.mu.Lock()
	t.open--
	t.mu.Unlock()
}

func (t *watcherTable) put(dw *dirWatch, now func() time.Time) string {
	id := process.NewID("w_")
	t.mu.Lock()
	t.polls[id] = &polled{dw: dw, last: now()}
	t.mu.Unlock()
	go t.expire(id, dw, now)
	return id
}

// expire closes a polled watcher nobody polls any more.
func (t *watcherTable) expire(id string, dw *dirWatch, now func() time.Time) {
	tick := time.NewTicker(watcherIdle / 10)
	defer tick.Stop()
	for {
		select {
		case <-dw.done:
			return
		case <-tick.C:
			t.mu.Lock()
			p, ok := t.polls[id]
			idle := ok && now().Sub(p.last) > watcherIdle
			if idle {
				delete(t.polls, id)
			}
			t.mu.Unlock()
			if !ok || idle {
				dw.close()
				return
			}
		}
	}
}

func (t *watcherTable) get(id string, now func() time.Time) (*dirWatch, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.polls[id]
	if !ok {
		return nil, false
	}
	p.last = now()
	return p.dw, true
}

func (t *watcherTable) remove(id string) bool {
	t.mu.Lock()
	p, ok := t.polls[id]
	delete(t.polls, id)
	t.mu.Unlock()
	if ok {
		p.dw.close()
	}
	return ok
}

func (t *watcherTable) closeAll() {
	t.mu.Lock()
	all := t.polls
	t.polls = map[string]*polled{}
	t.mu.Unlock()
	for _, p := range all {
		p.dw.close()
	}
}
