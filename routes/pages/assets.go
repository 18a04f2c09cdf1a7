package pages

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// web holds our committed pages (templates/, static/) and, when scripts/assets.sh has run before the build, the
// generated vendor/ tree. Embedding the parent directory keeps the build working without vendor/.
//
//go:embed web
var web embed.FS

// Files the pages cannot work without; their absence means the assets were not built.
var (
	terminalVendor = []string{"vendor/xterm/xterm.mjs", "vendor/xterm/xterm.css", "vendor/xterm/addon-fit.mjs"}
	desktopVendor  = []string{"vendor/novnc/core/rfb.js", "vendor/novnc/vendor/pako/lib/zlib/inflate.js"}
)

// assetsNotBuilt is the message of every answer that needs a vendor file the binary does not have.
const assetsNotBuilt = "assets not built: run make assets (scripts/assets.sh), then rebuild the gateway"

// Assets serves the embedded static and vendor files.
type Assets struct {
	fsys fs.FS
}

// NewAssets serves fsys, laid out like web/ (static/..., vendor/...). Nil means the embedded files.
func NewAssets(fsys fs.FS) (*Assets, error) {
	if fsys == nil {
		sub, err := fs.Sub(web, "web")
		if err != nil {
			return nil, err
		}
		fsys = sub
	}
	return &Assets{fsys: fsys}, nil
}

// Missing returns the first of names the assets lack, or "".
func (a *Assets) Missing(names []string) string {
	for _, n := range names {
		if _, err := fs.Stat(a.fsys, n); err != nil {
			return n
		}
	}
	return ""
}

// contentTypes covers what the pages load; anything else is refused rather than sniffed.
var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".txt":  "text/plain; charset=utf-8",
	".woff": "font/woff",
}

// serve answers GET/HEAD for name ("static/x.js" or "vendor/..."). Vendor files that are absent get 503 with
// assetsNotBuilt, because the fix is a build step, not a different URL.
func (a *Assets) serve(w http.ResponseWriter, r *http.Request, name string) {
	setSecurityHeaders(w.Header(), "")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	clean := path.Clean("/" + name)[1:]
	top, _, _ := strings.Cut(clean, "/")
	ctype, known := contentTypes[path.Ext(clean)]
	if clean != name || (top != "static" && top != "vendor") || !known {
		http.NotFound(w, r)
		return
	}
	f, err := a.fsys.Open(clean)
	if err != nil {
		if top == "vendor" && errors.Is(err, fs.ErrNotExist) {
			w.Header().Set("Retry-After", "60")
			http.Error(w, assetsNotBuilt, http.StatusServiceUnavailable)
			return
		}
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	rs, ok := f.(interface {
		Read([]byte) (int, error)
		Seek(int64, int) (int64, error)
	})
	if !ok {
		http.Error(w, "asset not seekable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	// Asset names are not versioned; a short max-age with revalidation keeps upgrades visible.
	w.Header().Set("Cache-Control", "public, max-age=300, must-revalidate")
	http.ServeContent(w, r, clean, time.Time{}, rs) // embedded files carry no time
}
