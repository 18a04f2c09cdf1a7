package files

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Stat describes path (following symlinks inside the workspace).
func (s *Service) Stat(path string) (agentapi.FileInfo, error) {
	abs, err := s.root.Resolve(path)
	if err != nil {
		return agentapi.FileInfo{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return agentapi.FileInfo{}, s.fsError("stat", abs, err)
	}
	return s.Info(abs, fi), nil
}

// List lists a directory's entries to the given depth (1: direct entries), sorted by path.
func (s *Service) List(req agentapi.ListRequest) (agentapi.ListResult, error) {
	abs, err := s.root.Resolve(req.Path)
	if err != nil {
		return agentapi.ListResult{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return agentapi.ListResult{}, s.fsError("listing", abs, err)
	}
	if !fi.IsDir() {
		return agentapi.ListResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "%s is not a directory", s.rel(abs)).With("path", s.rel(abs))
	}
	depth := max(req.Depth, 1)
	limit := req.Limit
	if limit <= 0 {
		limit = 1000
	}
	res := agentapi.ListResult{Entries: []agentapi.FileInfo{}}
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if p == abs {
			return err
		}
		if err != nil {
			return nil // unreadable entry: skip it, list the rest
		}
		rel, _ := filepath.Rel(abs, p)
		level := strings.Count(rel, string(filepath.Separator)) + 1
		if !req.Hidden && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if len(res.Entries) >= limit {
			res.Truncated = true
			return filepath.SkipAll
		}
		info, ierr := d.Info()
		if ierr == nil {
			res.Entries = append(res.Entries, s.Info(p, info))
		}
		if d.IsDir() && level >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return res, s.fsError("listing", abs, err)
	}
	sort.Slice(res.Entries, func(i, j int) bool { return res.Entries[i].Path < res.Entries[j].Path })
	return res, nil
}

// Mkdir creates a directory and its parents; an existing directory is fine.
func (s *Service) Mkdir(req agentapi.MkdirRequest) (agentapi.FileInfo, error) {
	mode, err := ParseMode(req.Mode)
	if err != nil {
		return agentapi.FileInfo{}, err
	}
	abs, err := s.root.Resolve(req.Path)
	if err != nil {
		return agentapi.FileInfo{}, err
	}
	perm := os.FileMode(0o755)
	if mode != nil {
		perm = *mode
	}
	if err := os.MkdirAll(abs, perm); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return agentapi.FileInfo{}, agentapi.Errorf(agentapi.CodeConflict, "%s: a file is in the way", s.rel(abs)).With("path", s.rel(abs))
		}
		return agentapi.FileInfo{}, s.fsError("creating", abs, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return agentapi.FileInfo{}, s.fsError("creating", abs, err)
	}
	return s.Info(abs, fi), nil
}

// Remove deletes a file, a symlink (not its target) or a directory (non-empty ones need Recursive).
func (s *Service) Remove(req agentapi.RemoveRequest) error {
	abs, err := s.root.ResolveParent(req.Path)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return s.fsError("removing", abs, err)
	}
	if fi.IsDir() && req.Recursive {
		err = os.RemoveAll(abs)
	} else {
		err = os.Remove(abs)
	}
	if err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return agentapi.Errorf(agentapi.CodeConflict, "%s is a non-empty directory: set recursive to remove it", s.rel(abs)).With("path", s.rel(abs))
		}
		return s.fsError("removing", abs, err)
	}
	return nil
}

// Move renames From to To (parents of To created). An existing To is a conflict unless Overwrite.
func (s *Service) Move(req agentapi.MoveRequest) (agentapi.FileInfo, error) {
	from, to, err := s.pair(req)
	if err != nil {
		return agentapi.FileInfo{}, err
	}
	if err := os.Rename(from, to); err != nil {
		if !errors.Is(err, syscall.EXDEV) {
			return agentapi.FileInfo{}, s.fsError("moving", from, err)
		}
		// another file system under the workspace (a mount): copy, then remove
		if err := s.copyTree(from, to); err != nil {
			return agentapi.FileInfo{}, err
		}
		if err := os.RemoveAll(from); err != nil {
			return agentapi.FileInfo{}, s.fsError("moving", from, err)
		}
	}
	fi, err := os.Lstat(to)
	if err != nil {
		return agentapi.FileInfo{}, s.fsError("moving", to, err)
	}
	return s.Info(to, fi), nil
}

// Copy copies a file or a directory tree (symlinks are copied as links).
func (s *Service) Copy(req agentapi.MoveRequest) (agentapi.FileInfo, error) {
	from, to, err := s.pair(req)
	if err != nil {
		return agentapi.FileInfo{}, err
	}
	if rel, err := filepath.Rel(from, to); err == nil && !strings.HasPrefix(rel, "..") {
		return agentapi.FileInfo{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "cannot copy %s into itself", s.rel(from))
	}
	if req.Overwrite {
		if err := os.RemoveAll(to); err != nil {
			return agentapi.FileInfo{}, s.fsError("copying to", to, err)
		}
	}
	if err := s.copyTree(from, to); err != nil {
		return agentapi.FileInfo{}, err
	}
	fi, err := os.Lstat(to)
	if err != nil {
		return agentapi.FileInfo{}, s.fsError("copying to", to, err)
	}
	return s.Info(to, fi), nil
}

func (s *Service) pair(req agentapi.MoveRequest) (string, string, error) {
	from, err := s.root.ResolveParent(req.From)
	if err != nil {
		return "", "", err
	}
	to, err := s.root.ResolveParent(req.To)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Lstat(from); err != nil {
		return "", "", s.fsError("reading", from, err)
	}
	if _, err := os.Lstat(to); err == nil && !req.Overwrite {
		return "", "", agentapi.Errorf(agentapi.CodeConflict, "%s exists: set overwrite to replace it", s.rel(to)).With("path", s.rel(to))
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return "", "", s.fsError("creating the parent of", to, err)
	}
	return from, to, nil
}

func (s *Service) copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return s.fsError("copying", p, err)
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return s.fsError("copying", p, err)
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(dst, info.Mode().Perm()|0o700); err != nil {
				return s.fsError("copying to", dst, err)
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return s.fsError("copying", p, err)
			}
			if err := os.Symlink(target, dst); err != nil {
				return s.fsError("copying to", dst, err)
			}
		case info.Mode().IsRegular():
			if err := s.copyFile(p, dst, info.Mode().Perm()); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Service) copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return s.fsError("copying", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return s.fsError("copying to", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return s.fsError("copying to", dst, err)
	}
	if err := out.Close(); err != nil {
		return s.fsError("copying to", dst, err)
	}
	return nil
}
