package bayapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sandgate/sandgate/routes/egress"
	"github.com/sandgate/sandgate/sandboxes"
)

// Files between sandboxes (sandbox-agent's export/import): an export registers paths of a sandbox as importable,
// copying nothing; an import streams a registered file from another sandbox of the same owner, or a public URL,
// through the gateway into the sandbox's workspace. Nothing is buffered whole: agent download -> agent upload.

var bucketExports = []byte("exports") // key: sandbox id NUL path

// Export is one registered file.
type Export struct {
	SandboxID  string    `json:"sandbox_id"`
	Path       string    `json:"path"`
	Owner      string    `json:"owner"`
	ExportedAt time.Time `json:"exported_at"`
}

func exportKey(sandboxID, p string) []byte { return []byte(sandboxID + "\x00" + p) }

func (s *Store) putExports(es []Export) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketExports)
		if err != nil {
			return err
		}
		for _, e := range es {
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := b.Put(exportKey(e.SandboxID, e.Path), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) export(sandboxID, p string) (*Export, error) {
	var e *Export
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExports)
		if b == nil {
			return nil
		}
		v := b.Get(exportKey(sandboxID, p))
		if v == nil {
			return nil
		}
		e = new(Export)
		return json.Unmarshal(v, e)
	})
	return e, err
}

func (s *Store) exports(sandboxID string) ([]Export, error) {
	out := []Export{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExports)
		if b == nil {
			return nil
		}
		prefix := []byte(sandboxID + "\x00")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, v = c.Next() {
			var e Export
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// transferRoutes are the operations of what users put in a sandbox (file transfer, node/exec); handler.go appends
// them to the route table.
func (h *Handler) transferRoutes() []route {
	S := "/v1/sandboxes/{id}"
	return []route{
		{"POST", S + "/node/exec", "Run JavaScript in the sandbox's persistent Node.js kernel (python/exec's shape)", false, false, h.nodeExec},
		{"POST", S + "/r/exec", "Run R in the sandbox's persistent R session (python/exec's shape; plots as PNG)", false, false, h.rExec},
		{"POST", S + "/files:export", "Register workspace files another sandbox of the same owner may import (no copy)", false, false, h.exportFiles},
		{"GET", S + "/files:export", "List the sandbox's exported files", false, false, h.listExports},
		{"POST", S + "/files:import", "Copy an exported file of another sandbox, or a public URL, into the workspace (streamed)", false, false, h.importFile},
	}
}

func (h *Handler) exportFiles(w http.ResponseWriter, r *http.Request, p Principal) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := decodeTransfer(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if len(req.Paths) == 0 || len(req.Paths) > 1000 {
		writeError(w, r, errorf(CodeValidation, "paths must list 1 to 1000 workspace paths"))
		return
	}
	sb, err := h.visible(r.Context(), r.PathValue("id"), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	now := h.cfg.Now().UTC()
	es := make([]Export, 0, len(req.Paths))
	for _, raw := range req.Paths {
		c, err := cleanWorkspacePath("paths", raw, false)
		if err != nil {
			writeError(w, r, err)
			return
		}
		es = append(es, Export{SandboxID: sb.ID, Path: c, Owner: sb.Owner, ExportedAt: now})
	}
	if err := h.cfg.Store.putExports(es); err != nil {
		writeError(w, r, fmt.Errorf("recording exports: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandbox_id": sb.ID, "exports": es})
}

func (h *Handler) listExports(w http.ResponseWriter, r *http.Request, p Principal) {
	sb, err := h.visible(r.Context(), r.PathValue("id"), p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	es, err := h.cfg.Store.exports(sb.ID)
	if err != nil {
		writeError(w, r, fmt.Errorf("reading exports: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandbox_id": sb.ID, "exports": es})
}

type importRequest struct {
	FromSandbox string `json:"from_sandbox"`
	Path        string `json:"path"`
	URL         string `json:"url"`
	Destination string `json:"destination"`
}

func (h *Handler) importFile(w http.ResponseWriter, r *http.Request, p Principal) {
	var req importRequest
	if err := decodeTransfer(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	fromSandbox := req.FromSandbox != "" || req.Path != ""
	if fromSandbox == (req.URL != "") {
		writeError(w, r, errorf(CodeValidation, "give either from_sandbox and path, or url"))
		return
	}
	id := r.PathValue("id")
	var (
		body   io.ReadCloser
		source string
		base   string
	)
	if fromSandbox {
		src, err := cleanWorkspacePath("path", req.Path, false)
		if err != nil || req.FromSandbox == "" {
			if err == nil {
				err = errorf(CodeValidation, "from_sandbox is required with path")
			}
			writeError(w, r, err)
			return
		}
		// The source must be the caller's (another owner's sandbox does not exist for it) and the path exported.
		from, err := h.visible(r.Context(), req.FromSandbox, p)
		if err != nil {
			writeError(w, r, err)
			return
		}
		exp, err := h.cfg.Store.export(from.ID, src)
		if err != nil {
			writeError(w, r, fmt.Errorf("reading exports: %w", err))
			return
		}
		if exp == nil {
			writeError(w, r, errorf(CodeForbidden, "%s is not exported by sandbox %s", src, from.ID).with("sandbox_id", from.ID).with("path", src))
			return
		}
		if _, err := h.visible(r.Context(), id, p); err != nil { // check the destination before starting the source
			writeError(w, r, err)
			return
		}
		st, err := h.running(r.Context(), from.ID, p, sandboxes.CapFilesystem)
		if err != nil {
			writeError(w, r, err)
			return
		}
		d, err := h.cfg.Agent.Download(r.Context(), st, src, "")
		if err != nil {
			writeError(w, r, err)
			return
		}
		body, source, base = d.Body, "sandbox:"+from.ID+"/"+src, path.Base(src)
	} else {
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			writeError(w, r, errorf(CodeValidation, "url must be an absolute http(s) URL"))
			return
		}
		if _, err := h.visible(r.Context(), id, p); err != nil {
			writeError(w, r, err)
			return
		}
		rc, err := fetchPublic(r.Context(), u)
		if err != nil {
			writeError(w, r, err)
			return
		}
		body, source, base = rc, u.Redacted(), path.Base(u.Path)
	}
	defer body.Close()
	dest := req.Destination
	if dest == "" {
		dest = base
	}
	dst, err := cleanWorkspacePath("destination", dest, false)
	if err != nil {
		writeError(w, r, err)
		return
	}
	t, err := h.running(r.Context(), id, p, sandboxes.CapFilesystem)
	if err != nil {
		writeError(w, r, err)
		return
	}
	capped := &cappedReader{r: body, max: h.cfg.MaxUploadBytes}
	n, err := h.cfg.Agent.Upload(r.Context(), t, dst, capped)
	if capped.n > h.cfg.MaxUploadBytes || errors.Is(err, errTooLarge) {
		writeError(w, r, tooLarge(h.cfg.MaxUploadBytes))
		return
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "path": dst, "size": n, "source": source})
}

func decodeTransfer(r *http.Request, into any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return errorf(CodeValidation, "reading the request body: %v", err)
	}
	return nil
}

// fetchPublic GETs a URL for an import. The gateway sits next to internal services, so the address actually dialled
// must be public: loopback, link-local, metadata and private ranges are refused after DNS resolution.
func fetchPublic(ctx context.Context, u *url.URL) (io.ReadCloser, error) {
	public := egress.Policy{}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("unparseable address %q", address)
		}
		if ok, why := public.AllowsDial(ap.Addr()); !ok {
			return &egress.RefusedError{Host: u.Host, Reason: why}
		}
		return nil
	}}
	client := &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, ResponseHeaderTimeout: 30 * time.Second},
		// Redirects are followed (each dial is checked again), at most 5.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errorf(CodeValidation, "url: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return nil, errorf(CodeForbidden, "importing %s refused: %s", u.Redacted(), refused.Reason)
		}
		return nil, errorf(CodeShipError, "fetching %s: %v", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, errorf(CodeShipError, "fetching %s: %s", u.Redacted(), resp.Status).with("upstream_status", resp.StatusCode)
	}
	return resp.Body, nil
}
