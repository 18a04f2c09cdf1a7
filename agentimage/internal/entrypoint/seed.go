package entrypoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// SeedHome copies the tree at seed (the image's HOME, mounted read-only) into home (a fresh tmpfs) before the
// entrypoint starts, so an injected image finds in HOME what its image put there while HOME stays sized like every
// sandbox's. Directories, regular files and symlinks are copied with their permission bits (owned by the agent's
// user, the sandbox user); other kinds are skipped, and so is what the sandbox user cannot read. It stops at the
// first write error (a seed larger than HOME's size ends in ENOSPC) and returns it; what was copied stays. A
// missing seed is no error: the image has no HOME, or the gateway mounted none.
func SeedHome(seed, home string) (copied int, err error) {
	if _, err := os.Lstat(seed); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	var skipped []string
	err = filepath.WalkDir(seed, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			if d != nil && d.IsDir() && p != seed {
				skipped = append(skipped, p)
				return fs.SkipDir
			}
			if p != seed {
				skipped = append(skipped, p)
				return nil
			}
			return werr
		}
		rel, err := filepath.Rel(seed, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(home, rel)
		info, err := d.Info()
		if err != nil {
			skipped = append(skipped, p)
			return nil
		}
		switch {
		case d.IsDir():
			if rel == "." {
				return nil // HOME's own mode and owner are the gateway's (0700, the sandbox user)
			}
			if err := os.Mkdir(dst, info.Mode().Perm()|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating %s: %w", dst, err)
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				skipped = append(skipped, p)
				return nil
			}
			if err := os.Symlink(target, dst); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating %s: %w", dst, err)
			}
		case d.Type().IsRegular():
			ok, err := copyFile(p, dst, info.Mode().Perm())
			if err != nil {
				return err
			}
			if !ok {
				skipped = append(skipped, p)
				return nil
			}
		default:
			return nil // devices, sockets, fifos: not copied
		}
		copied++
		return nil
	})
	if err == nil && len(skipped) > 0 {
		err = &SkippedError{Paths: skipped}
	}
	return copied, err
}

// SkippedError lists seed entries the sandbox user could not read; everything else was copied.
type SkippedError struct{ Paths []string }

func (e *SkippedError) Error() string {
	return fmt.Sprintf("%d entries of the image's HOME are not readable by the sandbox user (first: %s)", len(e.Paths), e.Paths[0])
}

// copyFile copies one regular file; ok is false when the source cannot be read.
func copyFile(src, dst string, perm fs.FileMode) (ok bool, err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, nil
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, perm|0o600)
	if err != nil {
		return false, fmt.Errorf("creating %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return false, fmt.Errorf("copying %s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return false, fmt.Errorf("copying %s: %w", dst, err)
	}
	return true, nil
}
