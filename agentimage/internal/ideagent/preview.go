package ideagent

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

const previewPrefix = "/preview/"

// servePreview serves workspace files on port 1319 for FastGPT's preview proxy: GET and HEAD (also HEAD asked for
// with x-fastgpt-preview-method, since the proxy always sends GET), ETag, single byte ranges, authenticated with
// x-fastgpt-agent-token.
func (a *Agent) servePreview(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	token := r.Header.Get("X-Fastgpt-Agent-Token")
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(a.password)) != 1 {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	escaped := r.URL.EscapedPath()
	if !strings.HasPrefix(escaped, previewPrefix) {
		http.NotFound(w, r)
		return
	}
	rel, err := url.PathUnescape(strings.TrimPrefix(escaped, previewPrefix))
	if err != nil || !validPreviewPath(rel) {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	abs, _, err := a.ws.resolve(rel)
	if err != nil {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	f, err := os.Open(abs)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	if strings.EqualFold(r.Header.Get("X-Fastgpt-Preview-Method"), http.MethodHead) {
		r = r.Clone(r.Context())
		r.Method = http.MethodHead
	}
	if strings.Contains(r.Header.Get("Range"), ",") {
		r.Header.Del("Range") // single ranges only: a multi-range request gets the whole file
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.Size(), st.ModTime().UnixNano()))
	w.Header().Set("Cache-Control", "private, no-cache")
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
}

func validPreviewPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}
