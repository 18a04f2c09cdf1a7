package api

import (
	"errors"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/files"
)

// download serves a file with Range, If-Range, ETag and If-None-Match / If-Modified-Since (http.ServeContent).
func (a *API) download(w http.ResponseWriter, r *http.Request) {
	f, fi, err := a.Files.Open(r.URL.Query().Get(agentapi.QueryPath))
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("ETag", files.ETag(fi))
	w.Header().Set("Cache-Control", "no-cache") // revalidate: the file may change under the same URL
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// upload streams a raw body into a file atomically (PUT /v1/files?path=&mode=).
func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mode, err := files.ParseMode(q.Get(agentapi.QueryMode))
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	p := q.Get(agentapi.QueryPath)
	if p == "" {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidPath, "path is required"))
		return
	}
	res, err := a.Files.WriteFile(r.Context(), p, r.Body, files.WriteOptions{
		Mode: mode, IfMatch: r.Header.Get("If-Match"), IfNoneMatch: r.Header.Get("If-None-Match"), Size: r.ContentLength,
	})
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	w.Header().Set("ETag", res.ETag)
	agentapi.WriteJSON(w, http.StatusOK, res)
}

// uploadMultipart streams multipart parts to files: a `path` field names the file for the `file` part after it
// (without one, the part's file name goes under ?path=, a directory). Nothing is buffered whole.
func (a *API) uploadMultipart(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "want a multipart/form-data body: %v", err))
		return
	}
	dir := r.URL.Query().Get(agentapi.QueryPath)
	mode, err := files.ParseMode(r.URL.Query().Get(agentapi.QueryMode))
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	res := agentapi.UploadResult{Files: []agentapi.WriteResult{}}
	fail := func(err error) {
		var e *agentapi.Error
		if !errors.As(err, &e) {
			e = &agentapi.Error{Code: agentapi.CodeInternal, Message: err.Error()}
		}
		if len(res.Files) > 0 {
			e.With("written", res.Files)
		}
		agentapi.WriteError(w, e)
	}
	target := ""
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(agentapi.Errorf(agentapi.CodeInvalidRequest, "reading multipart body: %v", err))
			return
		}
		switch part.FormName() {
		case agentapi.UploadFieldPath:
			b, err := io.ReadAll(io.LimitReader(part, 4097))
			if err != nil || len(b) > 4096 {
				fail(agentapi.Errorf(agentapi.CodeInvalidRequest, "the path field must be a path of at most 4096 bytes"))
				return
			}
			target = strings.TrimSpace(string(b))
		case agentapi.UploadFieldFile:
			dest := target
			if dest == "" {
				name := path.Base(part.FileName())
				if name == "." || name == "/" || name == "" {
					fail(agentapi.Errorf(agentapi.CodeInvalidPath, "a file part needs a path field before it or a file name"))
					return
				}
				dest = path.Join(dir, name)
			}
			wr, err := a.Files.WriteFile(r.Context(), dest, part, files.WriteOptions{Mode: mode, Size: -1})
			if err != nil {
				fail(err)
				return
			}
			res.Files = append(res.Files, wr)
			target = ""
		}
		part.Close()
	}
	if len(res.Files) == 0 {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "no %q part in the upload", agentapi.UploadFieldFile))
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, res)
}
