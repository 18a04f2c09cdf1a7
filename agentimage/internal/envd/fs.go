package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/filesystem"
)

// maxListEntries bounds one ListDir answer.
const maxListEntries = 100_000

// fsService implements filesystem.Filesystem on the workspace.
type fsService struct {
	s *Service
}

func (f *fsService) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	real, err := f.s.paths.resolveEntry(req.Msg.GetPath())
	if err != nil {
		return nil, connect.NewError(fsCode(err), err)
	}
	e, err := f.s.entryInfo(real)
	if err != nil {
		return nil, notFoundOr(req.Msg.GetPath(), err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}

// MakeDir creates a directory and its parents; an existing one is already_exists (the SDK answers false).
func (f *fsService) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	real, err := f.s.paths.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, connect.NewError(fsCode(err), err)
	}
	if fi, err := os.Stat(real); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory '%s' already exists", req.Msg.GetPath()))
		}
		return nil, invalidArg("path '%s' already exists and is not a directory", req.Msg.GetPath())
	}
	if err := os.MkdirAll(real, 0o755); err != nil {
		return nil, connect.NewError(fsCode(err), fmt.Errorf("creating directory '%s': %w", req.Msg.GetPath(), err))
	}
	e, err := f.s.entryInfo(real)
	if err != nil {
		return nil, asConnect(err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

// Move renames an entry, creating the destination's parents.
func (f *fsService) Move(_ context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	src, err := f.s.paths.resolveEntry(req.Msg.GetSource())
	if err != nil {
		return nil, connect.NewError(fsCode(err), err)
	}
	dst, err := f.s.paths.resolveEntry(req.Msg.GetDestination())
	if err != nil {
		return nil, connect.NewError(fsCode(err), err)
	}
	if src == f.s.d.Root.Dir() || dst == f.s.d.Root.Dir() {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the home directory itself cannot be moved or replaced"))
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, notFoundOr(req.Msg.GetSource(), err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, connect.NewError(fsCode(err), fmt.Errorf("creating the parents of '%s': %w", req.Msg.GetDestination(), err))
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, connect.NewError(fsCode(err), fmt.Errorf("moving '%s' to '%s': %w", req.Msg.GetSource(), req.Msg.GetDestination(), err))
	}
	e, err := f.s.entryInfo(dst)
	if err != nil {
		return nil, asConnect(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}

// ListDir lists a directory to depth levels (0 is 1), without following symlinks.
func (f *fsService) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	real, err := f.s.paths.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, connect.NewError(fsCode(err), err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, notFoundOr(req.Msg.GetPath(), err)
	}
	if !fi.IsDir() {
		return nil, invalidArg("path '%s' is not a directory", req.Msg.GetPath())
	}
	depth := max(int(req.Msg.GetDepth()), 1)
	out := &pb.ListDirResponse{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			if level > 1 {
				return nil // a subdirectory that vanished or is unreadable: list the rest
			}
			return err
		}
		for _, de := range ents {
			if len(out.Entries) >= maxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d entries; list with a smaller depth", maxListEntries))
			}
			full := filepath.Join(dir, de.Name())
			e, err := f.s.entryInfo(full)
			if err != nil {
				continue // removed meanwhile
			}
			out.Entries = append(out.Entries, e)
			if de.IsDir() && level < depth {
				if err := walk(full, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(real, 1); err != nil {
		return nil, asConnect(err)
	}
	return connect.NewResponse(out), nil
}

// Remove deletes a file or a directory tree.
func (f *fsService) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	if err := f.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	if p := req.Msg.GetPath(); isScreenshot(p) {
		if err := removeScreenshot(p); err != nil {
			return nil, notFoundOr(p, err)
		}
		return connect.NewResponse(&pb.RemoveResponse{}), nil
	}
	real, err := f.s.paths.resolveEntry(req.Msg.GetPath())
	if err != nil {
		return nil, connect.NewError(fsCode(err), err)
	}
	if real == f.s.d.Root.Dir() {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the home directory itself cannot be removed"))
	}
	if _, err := os.Lstat(real); err != nil {
		return nil, notFoundOr(req.Msg.GetPath(), err)
	}
	if err := os.RemoveAll(real); err != nil {
		return nil, connect.NewError(fsCode(err), fmt.Errorf("removing '%s': %w", req.Msg.GetPath(), err))
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

func notFoundOr(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("path '%s' does not exist", p))
	}
	return connect.NewError(fsCode(err), err)
}

// entryInfo describes the entry at real (not following a final symlink), named as E2B sees it.
func (s *Service) entryInfo(real string) (*pb.EntryInfo, error) {
	fi, err := os.Lstat(real)
	if err != nil {
		return nil, err
	}
	e := &pb.EntryInfo{
		Name: fi.Name(), Path: s.paths.external(real), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()),
		Permissions: fi.Mode().String(), ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	if real == s.d.Root.Dir() {
		e.Name = filepath.Base(HomeDir)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = pb.FileType_FILE_TYPE_SYMLINK
		if target, err := os.Readlink(real); err == nil {
			e.SymlinkTarget = &target
		}
	case fi.IsDir():
		e.Type = pb.FileType_FILE_TYPE_DIRECTORY
	case fi.Mode().IsRegular():
		e.Type = pb.FileType_FILE_TYPE_FILE
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		e.Metadata = readMetadata(real)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = ownerName(st.Uid)
		e.Group = groupName(st.Gid)
	}
	return e, nil
}

// ownerName is the user name of uid; the sandbox's own account is E2B's "user".
func ownerName(uid uint32) string {
	if int(uid) == os.Getuid() {
		return DefaultUser
	}
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return u.Username
	}
	return strconv.Itoa(int(uid))
}

func groupName(gid uint32) string {
	if int(gid) == os.Getgid() {
		return DefaultUser
	}
	if g, err := user.LookupGroupId(strconv.Itoa(int(gid))); err == nil {
		return g.Name
	}
	return strconv.Itoa(int(gid))
}
