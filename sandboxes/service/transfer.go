package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"

	"github.com/sandgate/sandgate/sandboxes"
)

// Files between sandboxes (sandbox-agent's export/import): an export registers paths of a sandbox as importable,
// copying nothing; an import streams a registered file from another sandbox of the same owner, or a public URL,
// through the gateway into the sandbox's workspace. Nothing is buffered whole: agent download -> agent upload.

// ExportStore keeps the registered exports (the gateway's embedded store).
type ExportStore interface {
	// PutExports refuses the call with a quota_exceeded *sandboxes.Error when an owner's exports would pass l.
	PutExports(es []sandboxes.Export, l sandboxes.ExportLimits) error
	// Export is the registration of path in sandboxID, nil when there is none (an expired one is returned).
	Export(sandboxID, path string) (*sandboxes.Export, error)
	// Exports lists a sandbox's registrations, expired ones included.
	Exports(sandboxID string) ([]sandboxes.Export, error)
}

// MaxExportPaths bounds the paths of one export call.
const MaxExportPaths = 1000

// Fetcher GETs a public URL for an import; its refusals are typed (*Error).
type Fetcher func(ctx context.Context, u *url.URL) (io.ReadCloser, error)

// ExportFiles registers workspace paths of a sandbox p owns as importable by p's other sandboxes.
func (s *Service) ExportFiles(ctx context.Context, p Principal, id string, paths []string) ([]sandboxes.Export, error) {
	if len(paths) == 0 || len(paths) > MaxExportPaths {
		return nil, Errorf(CodeValidation, "paths must list 1 to %d workspace paths", MaxExportPaths).With("field", "paths").With("limit", MaxExportPaths)
	}
	if s.cfg.Exports == nil {
		return nil, Errorf(CodeCapability, "exports are not kept on this gateway").With("capability", "exports").With("available", []string{})
	}
	sb, err := s.Visible(ctx, p, id)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now().UTC()
	es := make([]sandboxes.Export, 0, len(paths))
	for _, raw := range paths {
		if len(raw) > sandboxes.MaxExportPathBytes {
			return nil, Errorf(CodeValidation, "an exported path is %d bytes, the limit is %d", len(raw), sandboxes.MaxExportPathBytes).
				With("field", "paths").With("limit", sandboxes.MaxExportPathBytes)
		}
		c, err := CleanWorkspacePath("paths", raw, false)
		if err != nil {
			return nil, err
		}
		es = append(es, sandboxes.Export{SandboxID: sb.ID, Path: c, Owner: sb.Owner, ExportedAt: now, ExpiresAt: s.cfg.ExportLimits.ExpiresAt(now)})
	}
	if err := s.cfg.Exports.PutExports(es, s.cfg.ExportLimits); err != nil {
		var se *sandboxes.Error
		if errors.As(err, &se) {
			return nil, err // quota_exceeded, typed with its details
		}
		return nil, fmt.Errorf("recording exports: %w", err)
	}
	return es, nil
}

// ListExports lists the live exports of a sandbox p can see.
func (s *Service) ListExports(ctx context.Context, p Principal, id string) ([]sandboxes.Export, error) {
	sb, err := s.Visible(ctx, p, id)
	if err != nil {
		return nil, err
	}
	out := []sandboxes.Export{}
	if s.cfg.Exports == nil {
		return out, nil
	}
	all, err := s.cfg.Exports.Exports(sb.ID)
	if err != nil {
		return nil, fmt.Errorf("reading exports: %w", err)
	}
	now := s.cfg.Now()
	for _, e := range all {
		if !e.Expired(now) {
			out = append(out, e)
		}
	}
	return out, nil
}

// ImportParams is a file to copy into a sandbox: either an exported file of another sandbox, or a public URL.
type ImportParams struct {
	FromSandbox string
	Path        string
	URL         string
	// Destination is a workspace path; "" is the source's base name.
	Destination string
}

// Imported is a finished import.
type Imported struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Source string `json:"source"`
}

// ImportFile streams an exported file of another sandbox of p's, or a public URL, into a sandbox p owns.
func (s *Service) ImportFile(ctx context.Context, p Principal, id string, req ImportParams) (Imported, error) {
	body, source, base, err := s.importSource(ctx, p, id, req)
	if err != nil {
		return Imported{}, err
	}
	defer body.Close()
	dest := req.Destination
	if dest == "" {
		dest = base
	}
	t, dst, err := s.fileTarget(ctx, p, id, "destination", dest, false)
	if err != nil {
		return Imported{}, err
	}
	n, err := s.uploadCapped(ctx, t, dst, body)
	if err != nil {
		return Imported{}, err
	}
	return Imported{Path: dst, Size: n, Source: source}, nil
}

// importSource opens what an import reads: an exported file of another sandbox of p's, or a public URL, once the
// destination sandbox is known to be p's. It returns the body, a description of the source and its base name.
func (s *Service) importSource(ctx context.Context, p Principal, id string, req ImportParams) (io.ReadCloser, string, string, error) {
	fromSandbox := req.FromSandbox != "" || req.Path != ""
	if fromSandbox == (req.URL != "") {
		return nil, "", "", Errorf(CodeValidation, "give either from_sandbox and path, or url")
	}
	if !fromSandbox {
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", "", Errorf(CodeValidation, "url must be an absolute http(s) URL")
		}
		if _, err := s.Visible(ctx, p, id); err != nil {
			return nil, "", "", err
		}
		rc, err := s.fetch(ctx, u)
		if err != nil {
			return nil, "", "", err
		}
		return rc, u.Redacted(), path.Base(u.Path), nil
	}
	src, err := CleanWorkspacePath("path", req.Path, false)
	if err != nil {
		return nil, "", "", err
	}
	if req.FromSandbox == "" {
		return nil, "", "", Errorf(CodeValidation, "from_sandbox is required with path")
	}
	// The source must be the caller's (another owner's sandbox does not exist for it) and the path exported.
	from, err := s.Visible(ctx, p, req.FromSandbox)
	if err != nil {
		return nil, "", "", err
	}
	var exp *sandboxes.Export
	if s.cfg.Exports != nil {
		exp, err = s.cfg.Exports.Export(from.ID, src)
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("reading exports: %w", err)
	}
	if exp == nil || exp.Expired(s.cfg.Now()) { // an expired export is refused before the sweep removes it
		return nil, "", "", Errorf(CodeForbidden, "%s is not exported by sandbox %s", src, from.ID).With("sandbox_id", from.ID).With("path", src)
	}
	if _, err := s.Visible(ctx, p, id); err != nil { // check the destination before starting the source
		return nil, "", "", err
	}
	st, err := s.Running(ctx, p, from.ID, sandboxes.CapFilesystem)
	if err != nil {
		return nil, "", "", err
	}
	d, err := s.cfg.Agent.Download(ctx, st, src, "")
	if err != nil {
		return nil, "", "", err
	}
	return d.Body, "sandbox:" + from.ID + "/" + src, path.Base(src), nil
}

func (s *Service) fetch(ctx context.Context, u *url.URL) (io.ReadCloser, error) {
	if s.cfg.Fetch == nil {
		return nil, Errorf(CodeCapability, "importing from a URL is not available on this gateway").With("capability", "import_url").With("available", []string{})
	}
	return s.cfg.Fetch(ctx, u)
}
