package envd

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// restError is envd's REST error body: the numeric code equals the HTTP status.
type restError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeREST(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(restError{Code: status, Message: msg})
}

// httpError is a REST error with its status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func httpErrorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

func writeErr(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeREST(w, he.status, he.msg)
		return
	}
	writeREST(w, restStatus(err), err.Error())
}

// restStatus is the HTTP status of a file-system error, as E2B's SDK maps them (404 → FileNotFoundError, 507 →
// NotEnoughSpaceError, 400 → InvalidArgumentError).
func restStatus(err error) int {
	switch {
	case errors.Is(err, errOutside), errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage
	}
	var pe *pathError
	if errors.As(err, &pe) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// restUser checks the username query parameter of /files: root is 403, an unknown user 401 (as envd).
func (s *Service) restUser(r *http.Request) error {
	err := s.checkUser(r.URL.Query().Get("username"))
	if err == nil {
		return nil
	}
	if ue := (*userError)(nil); asUserError(err, &ue) && ue.root {
		return httpErrorf(http.StatusForbidden, "%s", err)
	}
	return httpErrorf(http.StatusUnauthorized, "%s", err)
}

// getEnvs answers the sandbox-wide environment (the create's envVars), which the code interpreter loads.
func (s *Service) getEnvs(w http.ResponseWriter, r *http.Request) {
	env, err := sandboxEnv(r.Header)
	if err != nil {
		writeREST(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(env)
}

// getFile answers a file's bytes (Range and conditional requests work).
func (s *Service) getFile(w http.ResponseWriter, r *http.Request) {
	if err := s.restUser(r); err != nil {
		writeErr(w, err)
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		writeREST(w, http.StatusBadRequest, "query parameter 'path' is required")
		return
	}
	var f *os.File
	real, err := p, error(nil)
	if isScreenshot(p) {
		f, err = openScreenshot(p)
	} else if real, err = s.paths.resolve(p); err == nil {
		f, err = os.Open(real)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			writeREST(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
			return
		}
		writeErr(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeErr(w, err)
		return
	}
	if fi.IsDir() {
		writeREST(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
		return
	}
	if !fi.Mode().IsRegular() {
		writeREST(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is not a regular file", p))
		return
	}
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": filepath.Base(real)}))
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// uploaded is one entry of POST /files' answer.
type uploaded struct {
	Name     string            `json:"name"`
	Path     string            `json:"path"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// postFiles writes files: multipart (parts named "file", each filename the destination; ?path= wins for a single
// part) or an octet-stream body to ?path= (gzip allowed). Parents are created and existing files truncated.
func (s *Service) postFiles(w http.ResponseWriter, r *http.Request) {
	if err := s.restUser(r); err != nil {
		writeErr(w, err)
		return
	}
	md, err := uploadMetadata(r.Header)
	if err != nil {
		writeErr(w, err)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []uploaded
	switch ct {
	case "multipart/form-data":
		out, err = s.uploadMultipart(r, md)
	case "application/octet-stream":
		out, err = s.uploadOctet(r, md)
	default:
		err = httpErrorf(http.StatusBadRequest, "unsupported content type %q: use multipart/form-data or application/octet-stream", ct)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Service) uploadOctet(r *http.Request, md map[string]string) ([]uploaded, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return nil, httpErrorf(http.StatusBadRequest, "query parameter 'path' is required for an octet-stream upload")
	}
	var body io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, httpErrorf(http.StatusBadRequest, "the gzip body cannot be read: %v", err)
		}
		defer zr.Close()
		body = zr
	default:
		return nil, httpErrorf(http.StatusBadRequest, "unsupported Content-Encoding %q", enc)
	}
	u, err := s.writeFile(p, body, md)
	if err != nil {
		return nil, err
	}
	return []uploaded{u}, nil
}

func (s *Service) uploadMultipart(r *http.Request, md map[string]string) ([]uploaded, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, httpErrorf(http.StatusBadRequest, "the multipart body cannot be read: %v", err)
	}
	override := r.URL.Query().Get("path")
	var out []uploaded
	seen := map[string]bool{}
	err = eachFilePart(mr, maxParts, func(filename string, body io.Reader) error {
		dest := filename
		if override != "" {
			if len(out) > 0 {
				return httpErrorf(http.StatusBadRequest, "?path= names one file, but the body has several parts")
			}
			dest = override
		}
		if dest == "" {
			return httpErrorf(http.StatusBadRequest, "a part named 'file' has no filename (the destination path)")
		}
		key := s.paths.clean(dest)
		if seen[key] {
			return httpErrorf(http.StatusBadRequest, "path '%s' is given twice", dest)
		}
		seen[key] = true
		u, err := s.writeFile(dest, body, md)
		if err != nil {
			return err
		}
		out = append(out, u)
		return nil
	})
	if err != nil {
		return out, err
	}
	if len(out) == 0 {
		return nil, httpErrorf(http.StatusBadRequest, "the multipart body has no part named 'file'")
	}
	return out, nil
}

// writeFile writes body to the E2B path p through a temporary file beside it, so a failed upload leaves the old
// file, capped at MaxFileBytes. md (the upload's metadata) becomes the new file's user.e2b.* attributes.
func (s *Service) writeFile(p string, body io.Reader, md map[string]string) (uploaded, error) {
	real, err := s.paths.resolve(p)
	if err != nil {
		return uploaded{}, err
	}
	if real == s.d.Root.Dir() {
		return uploaded{}, httpErrorf(http.StatusBadRequest, "path '%s' is a directory", p)
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		return uploaded{}, fmt.Errorf("creating the parents of '%s': %w", p, err)
	}
	if fi, err := os.Stat(real); err == nil && fi.IsDir() {
		return uploaded{}, httpErrorf(http.StatusBadRequest, "path '%s' is a directory", p)
	}
	tmp, err := os.CreateTemp(filepath.Dir(real), ".e2b-upload-*")
	if err != nil {
		return uploaded{}, fmt.Errorf("writing '%s': %w", p, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	n, err := io.Copy(tmp, io.LimitReader(body, s.d.MaxFileBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return uploaded{}, httpErrorf(http.StatusInsufficientStorage, "not enough disk space to write '%s'", p)
		}
		return uploaded{}, httpErrorf(http.StatusBadRequest, "reading the upload of '%s': %v", p, err)
	}
	if n > s.d.MaxFileBytes {
		return uploaded{}, httpErrorf(http.StatusInsufficientStorage, "'%s' is over the sandbox's %d-byte limit for one file", p, s.d.MaxFileBytes)
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(real); err == nil {
		mode = fi.Mode().Perm()
	}
	_ = os.Chmod(tmp.Name(), mode)
	if err := setMetadata(tmp.Name(), md); err != nil {
		return uploaded{}, err
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return uploaded{}, fmt.Errorf("writing '%s': %w", p, err)
	}
	return uploaded{Name: filepath.Base(real), Path: s.paths.external(real), Type: "file", Metadata: md}, nil
}
