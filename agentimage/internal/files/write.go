package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// WriteOptions tunes WriteFile.
type WriteOptions struct {
	// Mode is the file's mode; nil keeps an existing file's mode, or 0644 for a new one.
	Mode *os.FileMode
	// IfMatch: "" no check; "*" the file must exist; otherwise its ETag must equal this (a list is allowed).
	IfMatch string
	// IfNoneMatch "*": the file must not exist.
	IfNoneMatch string
	// Size is the expected length if known (-1: unknown); more than the cap is refused before reading.
	Size int64
}

// ParseMode reads an octal mode ("0755", "644").
func ParseMode(s string) (*os.FileMode, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o7777 {
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "mode %q: want octal like 0644", s)
	}
	m := os.FileMode(n) & os.ModePerm // setuid and friends are not for an API to set
	return &m, nil
}

// WriteFile streams r into path atomically: a temporary file in the same directory, renamed over the target once
// complete. Parents are created. A body over the size cap is too_large, a full disk no_space; the target is
// untouched in both cases.
func (s *Service) WriteFile(ctx context.Context, path string, r io.Reader, opts WriteOptions) (agentapi.WriteResult, error) {
	if opts.Size > s.maxBytes {
		return agentapi.WriteResult{}, s.tooLarge(path)
	}
	abs, err := s.root.Resolve(path)
	if err != nil {
		return agentapi.WriteResult{}, err
	}
	if abs == s.root.Dir() {
		return agentapi.WriteResult{}, agentapi.Errorf(agentapi.CodeInvalidPath, "cannot write over the workspace root")
	}
	// Fail fast before reading a large body; checked again under the lock before the rename.
	if _, err := s.precondition(abs, opts); err != nil {
		return agentapi.WriteResult{}, err
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agentapi.WriteResult{}, s.fsError("creating the parent of", abs, err)
	}
	tmp, err := os.CreateTemp(dir, ".sandgate-write-*")
	if err != nil {
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, io.LimitReader(contextReader{ctx, r}, s.maxBytes+1))
	if err != nil {
		var ae *agentapi.Error
		if errors.As(err, &ae) {
			return agentapi.WriteResult{}, ae
		}
		if isReadError(err) {
			return agentapi.WriteResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "reading the body for %s: %v", s.rel(abs), err)
		}
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	if n > s.maxBytes {
		return agentapi.WriteResult{}, s.tooLarge(path)
	}
	if err := tmp.Sync(); err != nil {
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	if err := tmp.Close(); err != nil {
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	unlock := s.lock(abs)
	defer unlock()
	existing, err := s.precondition(abs, opts)
	if err != nil {
		return agentapi.WriteResult{}, err
	}
	mode := os.FileMode(0o644)
	if existing != nil {
		mode = existing.Mode().Perm()
	}
	if opts.Mode != nil {
		mode = *opts.Mode
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	committed = true
	fi, err := os.Stat(abs)
	if err != nil {
		return agentapi.WriteResult{}, s.fsError("writing", abs, err)
	}
	return agentapi.WriteResult{Path: s.rel(abs), Size: fi.Size(), ETag: ETag(fi)}, nil
}

// precondition checks If-Match / If-None-Match against the current file; it returns the file's info if it exists.
func (s *Service) precondition(abs string, opts WriteOptions) (fs.FileInfo, error) {
	fi, err := os.Stat(abs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, s.fsError("writing", abs, err)
	}
	if err != nil {
		fi = nil
	}
	if fi != nil && fi.IsDir() {
		return nil, agentapi.Errorf(agentapi.CodeConflict, "%s is a directory", s.rel(abs)).With("path", s.rel(abs))
	}
	rel := s.rel(abs)
	if opts.IfNoneMatch == "*" && fi != nil {
		return nil, agentapi.Errorf(agentapi.CodePreconditionFail, "%s already exists (If-None-Match: *)", rel).With("path", rel).With("etag", ETag(fi))
	}
	if im := strings.TrimSpace(opts.IfMatch); im != "" {
		if fi == nil {
			return nil, agentapi.Errorf(agentapi.CodePreconditionFail, "%s does not exist (If-Match: %s)", rel, im).With("path", rel)
		}
		if im != "*" && !etagListHas(im, ETag(fi)) {
			return nil, agentapi.Errorf(agentapi.CodePreconditionFail, "%s changed: its ETag is %s, not %s", rel, ETag(fi), im).
				With("path", rel).With("etag", ETag(fi))
		}
	}
	return fi, nil
}

func etagListHas(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag {
			return true
		}
	}
	return false
}

func (s *Service) tooLarge(path string) error {
	return agentapi.Errorf(agentapi.CodeTooLarge, "%s: a file may hold at most %d bytes", path, s.maxBytes).With("max_bytes", s.maxBytes)
}

// contextReader stops a copy when ctx ends (a client that went away mid-upload).
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, readError{err}
	}
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		return n, readError{err}
	}
	return n, err
}

// readError marks errors of the body being read, as opposed to the file being written.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

func isReadError(err error) bool {
	var re readError
	return errors.As(err, &re)
}
