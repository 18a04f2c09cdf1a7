package envd

import (
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
)

func TestFilesystemCalls(t *testing.T) {
	te := newTestEnvd(t)
	ctx := ctxFor(t)
	writeFile(t, te.dir+"/a/b/c.txt", "hello")
	if err := os.Symlink("/etc", te.dir+"/escape"); err != nil {
		t.Fatal(err)
	}

	st, err := te.fs.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: "/home/user/a/b/c.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	e := st.Msg.GetEntry()
	if e.GetName() != "c.txt" || e.GetPath() != "/home/user/a/b/c.txt" || e.GetType() != pb.FileType_FILE_TYPE_FILE || e.GetSize() != 5 ||
		e.GetPermissions() != "-rw-r--r--" || e.GetOwner() != "user" || time.Since(e.GetModifiedTime().AsTime()) > time.Hour {
		t.Fatalf("stat %+v", e)
	}
	// relative and ~ paths are the home's
	for _, p := range []string{"a/b/c.txt", "~/a/b/c.txt"} {
		if _, err := te.fs.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: p})); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}

	ls, err := te.fs.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: "/home/user", Depth: 2}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pb.FileType{}
	for _, e := range ls.Msg.GetEntries() {
		got[e.GetPath()] = e.GetType()
	}
	if len(got) != 3 || got["/home/user/a"] != pb.FileType_FILE_TYPE_DIRECTORY || got["/home/user/a/b"] != pb.FileType_FILE_TYPE_DIRECTORY ||
		got["/home/user/escape"] != pb.FileType_FILE_TYPE_SYMLINK {
		t.Fatalf("list depth 2: %v", got)
	}

	if _, err := te.fs.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: "/home/user/x/y"})); err != nil {
		t.Fatal(err)
	}
	_, err = te.fs.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: "/home/user/x/y"}))
	wantCode(t, err, connect.CodeAlreadyExists)

	mv, err := te.fs.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: "/home/user/a/b/c.txt", Destination: "/home/user/new/d.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != "/home/user/new/d.txt" {
		t.Fatalf("move %v %+v", err, mv)
	}
	if _, err := te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: "/home/user/new"})); err != nil {
		t.Fatal(err)
	}
	_, err = te.fs.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: "/home/user/new/d.txt"}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: "/home/user/new"}))
	wantCode(t, err, connect.CodeNotFound)
}

// TestFilesystemConfinement: paths outside the workspace, through .. or a symlink, are refused like the agent's
// own file API refuses them; the home itself cannot be removed.
func TestFilesystemConfinement(t *testing.T) {
	te := newTestEnvd(t)
	ctx := ctxFor(t)
	if err := os.Symlink("/etc", te.dir+"/escape"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/passwd", "/home/user/../../etc/passwd", "../etc/passwd", "/home/user/escape/passwd", "/home/sandbox/.bashrc"} {
		_, err := te.fs.Stat(ctx, connect.NewRequest(&pb.StatRequest{Path: p}))
		wantCode(t, err, connect.CodePermissionDenied)
		_, err = te.fs.ListDir(ctx, connect.NewRequest(&pb.ListDirRequest{Path: p}))
		wantCode(t, err, connect.CodePermissionDenied)
		_, err = te.fs.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: p, Destination: "/home/user/stolen"}))
		wantCode(t, err, connect.CodePermissionDenied)
	}
	writeFile(t, te.dir+"/mine.txt", "x")
	_, err := te.fs.Move(ctx, connect.NewRequest(&pb.MoveRequest{Source: "/home/user/mine.txt", Destination: "/home/user/escape/planted"}))
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = te.fs.MakeDir(ctx, connect.NewRequest(&pb.MakeDirRequest{Path: "/home/user/escape/newdir"}))
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = te.fs.WatchDir(ctx, connect.NewRequest(&pb.WatchDirRequest{Path: "/home/user/escape"}))
	if err == nil {
		_, err = te.fs.CreateWatcher(ctx, connect.NewRequest(&pb.CreateWatcherRequest{Path: "/home/user/escape"}))
	}
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = te.fs.Remove(ctx, connect.NewRequest(&pb.RemoveRequest{Path: "/home/user"}))
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = te.fs.Stat(ctx, asUser(connect.NewRequest(&pb.StatRequest{Path: "/home/user"}), "root"))
	wantCode(t, err, connect.CodePermissionDenied)
}

func TestWatchDir(t *testing.T) {
	te := newTestEnvd(t)
	writeFile(t, te.dir+"/w/sub/.keep", "")
	st, err := te.fs.WatchDir(ctxFor(t), connect.NewRequest(&pb.WatchDirRequest{Path: "/home/user/w", Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("first message %v %v", st.Msg(), st.Err())
	}
	writeFile(t, te.dir+"/w/sub/new.txt", "x")
	for st.Receive() {
		if fe := st.Msg().GetFilesystem(); fe != nil && fe.GetName() == "sub/new.txt" && fe.GetType() == pb.EventType_EVENT_TYPE_CREATE {
			break
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	missing, err := te.fs.WatchDir(ctxFor(t), connect.NewRequest(&pb.WatchDirRequest{Path: "/home/user/nope"}))
	if err != nil {
		t.Fatal(err)
	}
	if missing.Receive() {
		t.Fatalf("watching a missing directory started: %v", missing.Msg())
	}
	wantCode(t, missing.Err(), connect.CodeNotFound)
}

func TestPolledWatcher(t *testing.T) {
	te := newTestEnvd(t)
	ctx := ctxFor(t)
	cw, err := te.fs.CreateWatcher(ctx, connect.NewRequest(&pb.CreateWatcherRequest{Path: "/home/user"}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	writeFile(t, te.dir+"/polled.txt", "x")
	for {
		ev, err := te.fs.GetWatcherEvents(ctx, connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Msg.GetEvents()) > 0 && ev.Msg.GetEvents()[0].GetName() == "polled.txt" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no event for polled.txt")
		case <-time.After(20 * time.Millisecond): // polling is the API under test
		}
	}
	if _, err := te.fs.RemoveWatcher(ctx, connect.NewRequest(&pb.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = te.fs.GetWatcherEvents(ctx, connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
	wantCode(t, err, connect.CodeNotFound)
}
