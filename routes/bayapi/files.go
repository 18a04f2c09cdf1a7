package bayapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// queryPath reads the required ?path= (a missing one is FastAPI's 422) and validates it (invalid_path).
func queryPath(w http.ResponseWriter, r *http.Request, def string, allowRoot bool) (string, bool) {
	q := queryFields(r)
	p := q.str("path", def == "", def)
	if !decodeOrFail(w, q) {
		return "", false
	}
	c, err := service.CleanWorkspacePath("path", p, allowRoot)
	if err != nil {
		writeError(w, r, err)
		return "", false
	}
	return c, true
}

func (h *Handler) readFile(w http.ResponseWriter, r *http.Request, p service.Principal) {
	fp, ok := queryPath(w, r, "", false)
	if !ok {
		return
	}
	b, err := h.svc.ReadFile(r.Context(), p, r.PathValue("id"), fp)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": string(b)})
}

func (h *Handler) writeFile(w http.ResponseWriter, r *http.Request, p service.Principal) {
	f := bodyFields(r, true)
	fp := f.str("path", true, "")
	content := f.str("content", true, "")
	if !decodeOrFail(w, f) {
		return
	}
	if err := h.svc.WriteFile(r.Context(), p, r.PathValue("id"), fp, strings.NewReader(content)); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) deleteFile(w http.ResponseWriter, r *http.Request, p service.Principal) {
	fp, ok := queryPath(w, r, "", false)
	if !ok {
		return
	}
	if err := h.svc.RemoveFile(r.Context(), p, r.PathValue("id"), fp); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) listDir(w http.ResponseWriter, r *http.Request, p service.Principal) {
	dp, ok := queryPath(w, r, ".", true)
	if !ok {
		return
	}
	entries, err := h.svc.ListDir(r.Context(), p, r.PathValue("id"), dp)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// upload streams the multipart `file` part to the agent without holding it in memory. Bay's clients send the
// `path` field before the file (httpx puts data fields first); if the file comes first it is spooled to a
// temporary file, still bounded by the cap.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		writeValidation(w, &validationError{issues: []ValidationIssue{
			{Type: "missing", Loc: []any{"body", "file"}, Msg: "Field required", Input: nil},
			{Type: "missing", Loc: []any{"body", "path"}, Msg: "Field required", Input: nil},
		}})
		return
	}
	if r.ContentLength > 0 && r.ContentLength > h.svc.MaxUploadBytes()+1<<20 {
		writeError(w, r, service.TooLarge(h.svc.MaxUploadBytes()))
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, r, service.Errorf(service.CodeValidation, "reading the multipart body: %v", err))
		return
	}
	var (
		dest    *string
		spooled *os.File
		written int64
		done    bool
	)
	defer func() {
		if spooled != nil {
			spooled.Close()
			os.Remove(spooled.Name())
		}
	}()
	send := func(body io.Reader) error {
		n, err := h.svc.Upload(r.Context(), p, id, *dest, body)
		written = n
		done = err == nil
		return err
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, service.ErrTooLarge) {
				writeError(w, r, service.TooLarge(h.svc.MaxUploadBytes()))
				return
			}
			writeError(w, r, service.Errorf(service.CodeValidation, "reading the multipart body: %v", err))
			return
		}
		switch part.FormName() {
		case "path":
			b, err := io.ReadAll(io.LimitReader(part, 4097))
			if err != nil || len(b) > 4096 {
				writeError(w, r, service.Errorf(service.CodeInvalidPath, "the path field is unreadable or too long"))
				return
			}
			s := string(b)
			dest = &s
			if spooled != nil && !done {
				if _, err := spooled.Seek(0, io.SeekStart); err != nil {
					writeError(w, r, fmt.Errorf("rewinding the spooled upload: %w", err))
					return
				}
				if err := send(spooled); err != nil {
					writeError(w, r, err)
					return
				}
			}
		case "file":
			if done || spooled != nil {
				writeError(w, r, service.Errorf(service.CodeValidation, "only one file part is accepted"))
				return
			}
			if dest != nil {
				if err := send(part); err != nil {
					writeError(w, r, err)
					return
				}
				continue
			}
			release, err := h.spool.acquire(p.Owner)
			if err != nil {
				writeError(w, r, err)
				return
			}
			defer release()
			spooled, err = os.CreateTemp("", "sandgate-upload-*")
			if err != nil {
				writeError(w, r, fmt.Errorf("spooling the upload: %w", err))
				return
			}
			capped := &service.CappedReader{R: part, Max: h.svc.MaxUploadBytes()}
			if _, err := io.Copy(spooled, capped); err != nil {
				if errors.Is(err, service.ErrTooLarge) {
					writeError(w, r, service.TooLarge(h.svc.MaxUploadBytes()))
				} else {
					writeError(w, r, service.Errorf(service.CodeValidation, "reading the uploaded file: %v", err))
				}
				return
			}
		default:
			// Unknown fields are ignored, as FastAPI does.
			_, _ = io.Copy(io.Discard, part)
		}
	}
	var missing []ValidationIssue
	if spooled == nil && !done {
		missing = append(missing, ValidationIssue{Type: "missing", Loc: []any{"body", "file"}, Msg: "Field required"})
	}
	if dest == nil {
		missing = append(missing, ValidationIssue{Type: "missing", Loc: []any{"body", "path"}, Msg: "Field required"})
	}
	if len(missing) > 0 {
		writeValidation(w, &validationError{issues: missing})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "path": *dest, "size": written})
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request, p service.Principal) {
	fp, ok := queryPath(w, r, "", false)
	if !ok {
		return
	}
	d, err := h.svc.DownloadFile(r.Context(), p, r.PathValue("id"), fp, r.Header.Get("Range"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer d.Body.Close()
	for _, k := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified", "Accept-Ranges"} {
		if v := d.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(fp)}))
	status := d.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.Copy(w, d.Body) // a failed copy means the client left mid-download
}
