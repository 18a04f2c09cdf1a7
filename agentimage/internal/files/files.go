// Package files is the workspace's file service: streamed downloads and atomic streamed writes with ETags, plus
// the JSON helpers agents use (stat, list, mkdir, move, copy, remove, read, write, edit, grep, glob). Every path
// goes through workspace.Root; every error is a typed agentapi.Error.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/workspace"
)

// Service serves one workspace.
type Service struct {
	root     *workspace.Root
	maxBytes int64

	mu    sync.Mutex
	locks map[string]*pathLock // per-path write locks, so If-Match checks and renames do not interleave
}

type pathLock struct {
	mu   sync.Mutex
	refs int
}

// New returns the service for root; maxBytes caps one written file (<= 0: agentapi.DefaultMaxFileBytes).
func New(root *workspace.Root, maxBytes int64) *Service {
	if maxBytes <= 0 {
		maxBytes = agentapi.DefaultMaxFileBytes
	}
	return &Service{root: root, maxBytes: maxBytes, locks: map[string]*pathLock{}}
}

// Root is the workspace root.
func (s *Service) Root() *workspace.Root { return s.root }

// MaxBytes is the per-file size cap.
func (s *Service) MaxBytes() int64 { return s.maxBytes }

func (s *Service) lock(abs string) func() {
	s.mu.Lock()
	l := s.locks[abs]
	if l == nil {
		l = &pathLock{}
		s.locks[abs] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, abs)
		}
		s.mu.Unlock()
	}
}

// ETag is a strong entity tag of a file's current version: inode, size and modification time. An atomic write
// always makes a new inode, so two versions never share a tag even within one mtime tick.
func ETag(fi fs.FileInfo) string {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return `"` + strconv.FormatUint(ino, 36) + "-" + strconv.FormatInt(fi.Size(), 36) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 36) + `"`
}

// Info describes abs for callers.
func (s *Service) Info(abs string, fi fs.FileInfo) agentapi.FileInfo {
	info := agentapi.FileInfo{
		Name: fi.Name(), Path: s.root.Rel(abs), Size: fi.Size(), Mode: fmt.Sprintf("%04o", fi.Mode().Perm()),
		IsDir: fi.IsDir(), IsSymlink: fi.Mode()&fs.ModeSymlink != 0,
		ModTime: fi.ModTime().UTC().Format(time.RFC3339Nano), ModTimeUnx: fi.ModTime().Unix(),
	}
	if fi.Mode().IsRegular() {
		info.ETag = ETag(fi)
	}
	if abs == s.root.Dir() {
		info.Name = "."
	}
	return info
}

// Open opens a regular file for reading.
func (s *Service) Open(path string) (*os.File, fs.FileInfo, error) {
	abs, err := s.root.Resolve(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, nil, s.fsError("opening", abs, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, s.fsError("opening", abs, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "%s is not a regular file", s.root.Rel(abs)).With("path", s.root.Rel(abs))
	}
	return f, fi, nil
}

// fsError turns an OS error into a typed one naming the workspace-relative path.
func (s *Service) fsError(doing, abs string, err error) error {
	var e *agentapi.Error
	if errors.As(err, &e) {
		return e
	}
	rel := s.root.Rel(abs)
	var code string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = agentapi.CodeFileNotFound
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &agentapi.Error{Code: agentapi.CodeNoSpace, Message: fmt.Sprintf("%s %s: no space left in the workspace", doing, rel),
			Details: map[string]any{"path": rel}}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		code = agentapi.CodePermissionDenied
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		code = agentapi.CodeConflict
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG):
		code = agentapi.CodeInvalidRequest
	default:
		code = agentapi.CodeInternal
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		msg = le.Err.Error()
	}
	return agentapi.Errorf(code, "%s %s: %s", doing, rel, msg).With("path", rel)
}

// rel is a helper for filepath.Rel under the root used by walkers.
func (s *Service) rel(abs string) string { return s.root.Rel(abs) }
