package bayapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sandgate/sandgate/routes/egress"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Files between sandboxes (sandbox-agent's export/import): an export registers paths of a sandbox as importable,
// copying nothing; an import streams a registered file from another sandbox of the same owner, or a public URL,
// through the gateway into the sandbox's workspace. Nothing is buffered whole: agent download -> agent upload.

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

func (h *Handler) exportFiles(w http.ResponseWriter, r *http.Request, p service.Principal) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := decodeTransfer(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	es, err := h.svc.ExportFiles(r.Context(), p, id, req.Paths)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandbox_id": id, "exports": es})
}

func (h *Handler) listExports(w http.ResponseWriter, r *http.Request, p service.Principal) {
	id := r.PathValue("id")
	es, err := h.svc.ListExports(r.Context(), p, id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandbox_id": id, "exports": es})
}

type importRequest struct {
	FromSandbox string `json:"from_sandbox"`
	Path        string `json:"path"`
	URL         string `json:"url"`
	Destination string `json:"destination"`
}

func (h *Handler) importFile(w http.ResponseWriter, r *http.Request, p service.Principal) {
	var req importRequest
	if err := decodeTransfer(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	res, err := h.svc.ImportFile(r.Context(), p, r.PathValue("id"), service.ImportParams(req))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "path": res.Path, "size": res.Size, "source": res.Source})
}

func decodeTransfer(r *http.Request, into any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return service.Errorf(service.CodeValidation, "reading the request body: %v", err)
	}
	return nil
}

// FetchPublic GETs a URL for an import. The gateway sits next to internal services, so the address actually dialled
// must be public: loopback, link-local, metadata and private ranges are refused after DNS resolution.
func FetchPublic(ctx context.Context, u *url.URL) (io.ReadCloser, error) {
	// The address policy (routes/egress) runs at dial time on every address, the redirects' too.
	dialer := egress.AddrRules{}.Dialer(10*time.Second, nil)
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
		return nil, service.Errorf(service.CodeValidation, "url: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return nil, service.Errorf(service.CodeForbidden, "importing %s refused: %s", u.Redacted(), refused.Reason).With("address", refused.Host)
		}
		return nil, service.Errorf(service.CodeShipError, "fetching %s: %v", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, service.Errorf(service.CodeShipError, "fetching %s: %s", u.Redacted(), resp.Status).With("upstream_status", resp.StatusCode)
	}
	return resp.Body, nil
}
