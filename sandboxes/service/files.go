package service

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
)

// WorkspaceRoot is where paths of the API are relative to.
const WorkspaceRoot = "/workspace"

// Reasons of an invalid_path error (details.reason), as Bay's validators/path.py names them.
const (
	PathReasonEmpty     = "empty_path"
	PathReasonNullByte  = "null_byte"
	PathReasonAbsolute  = "absolute_path"
	PathReasonTraversal = "path_traversal"
	// PathReasonRoot is ours: Bay lets "." through to the runtime, which then fails on a directory.
	PathReasonRoot = "workspace_root"
)

// CleanWorkspacePath checks a path as Bay's validators/path.py does: relative to /workspace; empty, absolute
// (including /workspace/x), NUL-carrying or escaping paths are refused with invalid_path, whose details are Bay's
// {field, reason}. field names the request field the path came from. It returns the cleaned relative path ("." for
// the root).
func CleanWorkspacePath(field, p string, allowRoot bool) (string, error) {
	invalid := func(reason, format string, args ...any) error {
		return Errorf(CodeInvalidPath, format, args...).With("field", field).With("reason", reason)
	}
	if p == "" || strings.TrimSpace(p) == "" {
		return "", invalid(PathReasonEmpty, "%s cannot be empty", field)
	}
	if strings.ContainsRune(p, 0) {
		return "", invalid(PathReasonNullByte, "%s contains invalid characters", field)
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "\\") {
		return "", invalid(PathReasonAbsolute, "%s must be a relative path (relative to %s)", field, WorkspaceRoot)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", invalid(PathReasonTraversal, "%s escapes workspace boundary", field)
	}
	if c == "." && !allowRoot {
		return "", invalid(PathReasonRoot, "%s must name a file inside the workspace", field)
	}
	return c, nil
}

// fileTarget cleans a workspace path of the request field field and resolves the running sandbox p owns that it
// is in.
func (s *Service) fileTarget(ctx context.Context, p Principal, id, field, path string, allowRoot bool) (sandboxes.Target, string, error) {
	c, err := CleanWorkspacePath(field, path, allowRoot)
	if err != nil {
		return sandboxes.Target{}, "", err
	}
	t, err := s.Running(ctx, p, id, sandboxes.CapFilesystem)
	return t, c, err
}

// ReadFile reads a workspace file of a sandbox p owns.
func (s *Service) ReadFile(ctx context.Context, p Principal, id, path string) ([]byte, error) {
	t, c, err := s.fileTarget(ctx, p, id, "path", path, false)
	if err != nil {
		return nil, err
	}
	return s.cfg.Agent.ReadFile(ctx, t, c)
}

// WriteFile writes a workspace file of a sandbox p owns (parents are created).
func (s *Service) WriteFile(ctx context.Context, p Principal, id, path string, content io.Reader) error {
	t, c, err := s.fileTarget(ctx, p, id, "path", path, false)
	if err != nil {
		return err
	}
	return s.cfg.Agent.WriteFile(ctx, t, c, content)
}

// ListDir lists a workspace directory ("." is the root) of a sandbox p owns.
func (s *Service) ListDir(ctx context.Context, p Principal, id, path string) ([]DirEntry, error) {
	t, c, err := s.fileTarget(ctx, p, id, "path", path, true)
	if err != nil {
		return nil, err
	}
	entries, err := s.cfg.Agent.ListDir(ctx, t, c)
	if entries == nil && err == nil {
		entries = []DirEntry{}
	}
	return entries, err
}

// fileTool is the front EditFile and SearchFiles share: an agent client with the file tools, the cleaned path, the
// operation's own check of its request (bad: nil when it passed, reported after a bad path as before), and only
// then the running sandbox p owns, so a refused request never starts a sandbox.
func (s *Service) fileTool(ctx context.Context, p Principal, id, path string, allowRoot bool, bad error) (FileTools, sandboxes.Target, string, error) {
	ft, ok := s.cfg.Agent.(FileTools)
	if !ok {
		return nil, sandboxes.Target{}, "", Errorf(CodeCapability, "this gateway's agent client does not edit or search files").
			With("capability", "file_tools").With("available", []string{})
	}
	c, err := CleanWorkspacePath("path", path, allowRoot)
	if err != nil {
		return nil, sandboxes.Target{}, "", err
	}
	if bad != nil {
		return nil, sandboxes.Target{}, "", bad
	}
	t, err := s.Running(ctx, p, id, sandboxes.CapFilesystem)
	return ft, t, c, err
}

// EditFile replaces text in a workspace file of a sandbox p owns: req.Old must occur exactly once unless
// req.ReplaceAll.
func (s *Service) EditFile(ctx context.Context, p Principal, id string, req agentapi.EditRequest) (agentapi.EditResult, error) {
	var bad error
	if req.Old == "" {
		bad = Errorf(CodeValidation, "the text to replace must not be empty")
	}
	ft, t, c, err := s.fileTool(ctx, p, id, req.Path, false, bad)
	if err != nil {
		return agentapi.EditResult{}, err
	}
	req.Path = c
	return ft.Edit(ctx, t, req)
}

// SearchFiles greps the workspace (or req.Path inside it) of a sandbox p owns.
func (s *Service) SearchFiles(ctx context.Context, p Principal, id string, req agentapi.GrepRequest) (agentapi.GrepResult, error) {
	var bad error
	if req.Pattern == "" {
		bad = Errorf(CodeValidation, "the pattern must not be empty")
	}
	if req.Path == "" {
		req.Path = "."
	}
	ft, t, c, err := s.fileTool(ctx, p, id, req.Path, true, bad)
	if err != nil {
		return agentapi.GrepResult{}, err
	}
	req.Path = c
	return ft.Grep(ctx, t, req)
}

// ErrTooLarge is what a CappedReader fails with once an upload passes the cap.
var ErrTooLarge = errors.New("upload exceeds the size limit")

// CappedReader counts what R gives and fails with ErrTooLarge once N passes Max.
type CappedReader struct {
	R   io.Reader
	N   int64
	Max int64
}

func (c *CappedReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	if c.N > c.Max {
		return n, ErrTooLarge
	}
	return n, err
}

// TooLarge is the error of an upload over max bytes.
func TooLarge(max int64) *Error {
	return Errorf(CodePayloadTooLarge, "upload exceeds the limit of %d bytes", max).With("max_bytes", max)
}

// MaxUploadBytes is the cap of one upload or import.
func (s *Service) MaxUploadBytes() int64 { return s.cfg.MaxUploadBytes }

// Upload streams body into a workspace file of a sandbox p owns (parents are created) and returns the bytes
// written; past MaxUploadBytes it fails with payload_too_large.
func (s *Service) Upload(ctx context.Context, p Principal, id, path string, body io.Reader) (int64, error) {
	t, c, err := s.fileTarget(ctx, p, id, "path", path, false)
	if err != nil {
		return 0, err
	}
	return s.uploadCapped(ctx, t, c, body)
}

func (s *Service) uploadCapped(ctx context.Context, t sandboxes.Target, path string, body io.Reader) (int64, error) {
	capped := &CappedReader{R: body, Max: s.cfg.MaxUploadBytes}
	n, err := s.cfg.Agent.Upload(ctx, t, path, capped)
	if capped.N > s.cfg.MaxUploadBytes || errors.Is(err, ErrTooLarge) {
		return 0, TooLarge(s.cfg.MaxUploadBytes)
	}
	return n, err
}

// RemoveFile removes a workspace file or directory (recursively) of a sandbox p owns.
func (s *Service) RemoveFile(ctx context.Context, p Principal, id, path string) error {
	t, c, err := s.fileTarget(ctx, p, id, "path", path, false)
	if err != nil {
		return err
	}
	return s.cfg.Agent.Remove(ctx, t, c)
}

// DownloadFile opens a workspace file of a sandbox p owns; rangeHeader is an HTTP Range ("" for the whole file).
func (s *Service) DownloadFile(ctx context.Context, p Principal, id, path, rangeHeader string) (*Download, error) {
	t, c, err := s.fileTarget(ctx, p, id, "path", path, false)
	if err != nil {
		return nil, err
	}
	return s.cfg.Agent.Download(ctx, t, c, rangeHeader)
}
