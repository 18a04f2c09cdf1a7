package bayapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Operations shared by the REST handlers and other dialects (the gateway's MCP server). Each one takes the
// caller's Principal and applies the same ownership, capability and ensure-running rules as the REST route that
// serves it; the REST handlers only decode, call these and encode.

// Authenticate resolves the caller of r as the REST API does (bearer key, or X-Owner when anonymous calls are allowed).
func (h *Handler) Authenticate(r *http.Request) (service.Principal, error) { return h.authenticate(r) }

// LookupKey finds the principal of a bearer token in the API's key ring.
func (h *Handler) LookupKey(token string) (service.Principal, bool) { return h.cfg.Keys.Lookup(token) }

// AsError translates any error of the API's operations into its typed code, message and details.
func AsError(err error) *service.Error { return service.AsError(err) }

// CreateParams is a sandbox to create.
type CreateParams struct {
	// Profile is a profile id; "" is DefaultProfile.
	Profile string
	// TTL is the hard lifetime; 0 is the profile's default.
	TTL time.Duration
	// CargoID attaches an existing cargo (workspace) of the caller's.
	CargoID *string
	// Dependencies are installed at start (python, node and r; apt only through a derived image).
	Dependencies *sandboxes.Dependencies
}

// DependenciesEnv checks dependencies asked for at create and returns the environment that hands them to the
// Manager, or nil when there are none.
func DependenciesEnv(d *sandboxes.Dependencies) (map[string]string, error) {
	if d == nil {
		return nil, nil
	}
	if err := d.Validate(); err != nil {
		return nil, service.Errorf(service.CodeValidation, "%v", err)
	}
	if len(d.Apt) > 0 {
		return nil, service.Errorf(service.CodeValidation, "apt packages cannot be installed at create: the sandbox runs as a non-root "+
			"user on a read-only root filesystem; build a derived image with them (make profile-images) and use it as the profile's image")
	}
	if len(d.Python)+len(d.Node)+len(d.R) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding dependencies: %w", err)
	}
	return map[string]string{sandboxes.EnvDependencies: string(b)}, nil
}

// CreateSandbox creates a sandbox owned by p and records its managed cargo.
func (h *Handler) CreateSandbox(ctx context.Context, p service.Principal, cp CreateParams) (SandboxResponse, error) {
	env, err := DependenciesEnv(cp.Dependencies)
	if err != nil {
		return SandboxResponse{}, err
	}
	return h.createSandboxEnv(ctx, p, cp, env)
}

// createSandboxEnv is CreateSandbox once the dependencies are an environment (the REST route reports bad ones as
// FastAPI's 422 before it gets here).
func (h *Handler) createSandboxEnv(ctx context.Context, p service.Principal, cp CreateParams, env map[string]string) (SandboxResponse, error) {
	profile := cp.Profile
	if profile == "" {
		profile = DefaultProfile
	}
	if cp.TTL < 0 {
		return SandboxResponse{}, service.Errorf(service.CodeValidation, "ttl must not be negative")
	}
	var known []string
	found := false
	for _, pr := range h.cfg.Sandboxes.Profiles() {
		known = append(known, pr.ID)
		found = found || pr.ID == profile
	}
	if !found {
		return SandboxResponse{}, service.Errorf(service.CodeValidation, "Invalid profile: %s", profile).With("profile", profile).With("available", known)
	}
	req := sandboxes.CreateRequest{Profile: profile, Owner: p.Owner, TTL: -1, Env: env}
	if cp.TTL > 0 {
		req.TTL = cp.TTL
	}
	if cp.CargoID != nil {
		c, err := h.cfg.Store.Cargo(*cp.CargoID)
		if err != nil {
			return SandboxResponse{}, err
		}
		if c == nil || (!p.Admin && c.Owner != p.Owner) {
			return SandboxResponse{}, service.Errorf(service.CodeNotFound, "Cargo not found: %s", *cp.CargoID)
		}
		req.WorkspaceID = c.ID
	}
	sb, err := h.cfg.Sandboxes.Create(ctx, req)
	if err != nil {
		return SandboxResponse{}, err
	}
	if cp.CargoID == nil && sb.WorkspaceID != "" {
		now := h.cfg.Now().UTC()
		sid := sb.ID
		if err := h.cfg.Store.PutCargo(&Cargo{
			ID: sb.WorkspaceID, Owner: p.Owner, Managed: true, ManagedBySandboxID: &sid, Backend: cargoBackend,
			SizeLimitMB: defaultCargoMB, CreatedAt: now, LastAccessedAt: now,
		}); err != nil {
			h.cfg.Logger.Warn("recording a managed cargo", "sandbox", sb.ID, "error", err)
		}
	}
	return h.sandboxResponse(sb, false), nil
}

// ListSandboxes lists one page of the sandboxes p may see and the cursor of the next page ("" at the end).
func (h *Handler) ListSandboxes(ctx context.Context, p service.Principal, opts sandboxes.ListOptions) ([]SandboxResponse, string, error) {
	switch opts.Status {
	case sandboxes.StatusIdle:
		// What reads idle includes the sandboxes still starting (bayStatus).
		opts.Statuses = []sandboxes.Status{sandboxes.StatusStarting}
	case sandboxes.StatusStarting:
		return []SandboxResponse{}, "", nil // a Bay client never sees starting
	}
	opts.Owner = ""
	if !p.Admin {
		opts.Owner = p.Owner
	}
	list, next, err := h.cfg.Sandboxes.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	items := make([]SandboxResponse, 0, len(list))
	for _, sb := range list {
		items = append(items, h.sandboxResponse(sb, false))
	}
	return items, next, nil
}

// GetSandbox describes a sandbox p may see.
func (h *Handler) GetSandbox(ctx context.Context, p service.Principal, id string) (SandboxResponse, error) {
	sb, err := h.visible(ctx, id, p)
	if err != nil {
		return SandboxResponse{}, err
	}
	return h.sandboxResponse(sb, true), nil
}

// StopSandbox stops a sandbox's compute, keeping its workspace.
func (h *Handler) StopSandbox(ctx context.Context, p service.Principal, id string) error {
	if _, err := h.visible(ctx, id, p); err != nil {
		return err
	}
	return h.cfg.Sandboxes.Stop(ctx, id)
}

// DeleteSandbox deletes a sandbox, its history and its managed cargo. It is idempotent: a sandbox that is gone (or
// was never visible to p) is not an error.
func (h *Handler) DeleteSandbox(ctx context.Context, p service.Principal, id string) error {
	sb, err := h.visible(ctx, id, p)
	if err != nil {
		if service.AsError(err).Code == service.CodeNotFound {
			return nil
		}
		return err
	}
	if err := h.cfg.Sandboxes.Delete(ctx, id); err != nil && service.AsError(err).Code != service.CodeNotFound {
		return err
	}
	if err := h.cfg.Store.DropHistory(id); err != nil {
		h.cfg.Logger.Warn("dropping history of a deleted sandbox", "sandbox", id, "error", err)
	}
	if sb.WorkspaceID != "" {
		if c, err := h.cfg.Store.Cargo(sb.WorkspaceID); err == nil && c != nil && c.Managed {
			if err := h.cfg.Store.DeleteCargo(c.ID); err != nil {
				h.cfg.Logger.Warn("forgetting a managed cargo", "cargo", c.ID, "error", err)
			}
		}
	}
	return nil
}

// Target resolves a sandbox p owns for a capability call and starts its compute when idle (see running).
func (h *Handler) Target(ctx context.Context, p service.Principal, id, capability string) (sandboxes.Target, error) {
	return h.running(ctx, id, p, capability)
}

// Kernel languages of RunKernel.
const (
	LangPython = "python"
	LangNode   = "node"
	LangR      = "r"
)

// KernelOutput is a finished kernel cell.
type KernelOutput struct {
	Success bool
	// Text is stdout, the cell's value and (for a successful cell) stderr, as python/exec's output.
	Text  string
	Error string
	// Images are base64 PNGs (python only).
	Images         []string
	ExecutionCount int
	ExecutionID    string
	Elapsed        time.Duration
	// Truncated is set when the output was cut (the kernel's cap, or the gateway's bound on agent replies).
	Truncated bool
}

// RunKernel runs code in the sandbox's persistent kernel of lang and records it in the history.
func (h *Handler) RunKernel(ctx context.Context, p service.Principal, id, lang, code string, timeout time.Duration, meta ExecMeta) (KernelOutput, error) {
	var (
		capability string
		run        kernelRun
	)
	switch lang {
	case LangPython:
		capability, run = sandboxes.CapPython, h.cfg.Agent.Python
	case LangNode:
		capability = sandboxes.CapNode
		if agent, ok := h.cfg.Agent.(service.NodeAgent); ok {
			run = func(ctx context.Context, t sandboxes.Target, req service.PythonRequest) (service.PythonResult, error) {
				res, err := agent.Node(ctx, t, req)
				res.Images = nil // Node answers carry no images
				return res, err
			}
		}
	case LangR:
		capability = sandboxes.CapR
		if agent, ok := h.cfg.Agent.(service.RAgent); ok {
			run = agent.R
		}
	default:
		return KernelOutput{}, service.Errorf(service.CodeValidation, "unknown kernel language %q (python, node or r)", lang)
	}
	if run == nil {
		return KernelOutput{}, service.Errorf(service.CodeCapability, "this gateway's agent client does not run %s", lang).With("capability", capability).With("available", []string{})
	}
	t, err := h.running(ctx, id, p, capability)
	if err != nil {
		return KernelOutput{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+agentGrace)
	defer cancel()
	start := time.Now()
	res, err := run(ctx, t, service.PythonRequest{Code: code, Timeout: timeout})
	elapsed := time.Since(start)
	if err != nil {
		return KernelOutput{}, err
	}
	text := res.Stdout
	if res.Result != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += res.Result
	}
	if res.Error == "" {
		// stderr of a successful cell (warnings) is output, as Jupyter shows it; it is not an error.
		text += res.Stderr
	}
	out := KernelOutput{
		Success: res.Error == "", Text: text, Error: res.Error, Images: res.Images, ExecutionCount: res.ExecutionCount, Elapsed: elapsed,
		Truncated: res.Truncated,
	}
	out.ExecutionID = h.record(id, lang, code, out.Success, elapsed, text, res.Error, meta)
	return out, nil
}

// ShellParams is a shell command to run.
type ShellParams struct {
	Command string
	// Cwd is relative to the workspace root; nil or "" is the root.
	Cwd     *string
	Timeout time.Duration
}

// ShellOutput is a finished shell command.
type ShellOutput struct {
	Success bool
	// ExitCode is -1 when the command timed out.
	ExitCode    int
	Stdout      string
	Error       string
	TimedOut    bool
	ExecutionID string
	Elapsed     time.Duration
	// Truncated is set when the output was cut (the agent's ring, or the gateway's bound on agent replies).
	Truncated bool
}

// RunShell runs a shell command to its end (or its timeout) and records it in the history.
func (h *Handler) RunShell(ctx context.Context, p service.Principal, id string, sp ShellParams, meta ExecMeta) (ShellOutput, error) {
	req := service.ExecRequest{Command: sp.Command, Timeout: sp.Timeout}
	t, err := h.shellTarget(ctx, id, p, sp.Cwd, &req.Cwd)
	if err != nil {
		return ShellOutput{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, req.Timeout+agentGrace)
	defer cancel()
	start := time.Now()
	res, err := h.cfg.Agent.Exec(ctx, t, req)
	elapsed := time.Since(start)
	if err != nil {
		return ShellOutput{}, err
	}
	exit := res.ExitCode
	errText := res.Stderr
	if res.TimedOut {
		exit = -1
		errText = strings.TrimRight("Command timed out\n"+res.Stderr, "\n")
	}
	out := ShellOutput{Success: exit == 0 && !res.TimedOut, ExitCode: exit, Stdout: res.Stdout, Error: errText,
		TimedOut: res.TimedOut, Elapsed: elapsed, Truncated: res.Truncated}
	out.ExecutionID = h.record(id, "shell", sp.Command, out.Success, elapsed, res.Stdout, errText, meta)
	return out, nil
}

// StreamShell starts a shell command and returns the agent's SSE stream of its events.
func (h *Handler) StreamShell(ctx context.Context, p service.Principal, id string, sp ShellParams) (io.ReadCloser, error) {
	if h.cfg.Streamer == nil {
		return nil, service.Errorf(service.CodeCapability, "streaming, processes and PTY are not available on this gateway").
			With("capability", "streaming").With("available", []string{})
	}
	req := service.ExecRequest{Command: sp.Command, Timeout: sp.Timeout}
	t, err := h.shellTarget(ctx, id, p, sp.Cwd, &req.Cwd)
	if err != nil {
		return nil, err
	}
	return h.cfg.Streamer.ExecStream(ctx, t, req)
}

// ReadFile reads a workspace file of a sandbox p owns.
func (h *Handler) ReadFile(ctx context.Context, p service.Principal, id, path string) ([]byte, error) {
	c, err := cleanWorkspacePath("path", path, false)
	if err != nil {
		return nil, err
	}
	t, err := h.running(ctx, id, p, sandboxes.CapFilesystem)
	if err != nil {
		return nil, err
	}
	return h.cfg.Agent.ReadFile(ctx, t, c)
}

// WriteFile writes a workspace file of a sandbox p owns (parents are created).
func (h *Handler) WriteFile(ctx context.Context, p service.Principal, id, path string, content io.Reader) error {
	c, err := cleanWorkspacePath("path", path, false)
	if err != nil {
		return err
	}
	t, err := h.running(ctx, id, p, sandboxes.CapFilesystem)
	if err != nil {
		return err
	}
	return h.cfg.Agent.WriteFile(ctx, t, c, content)
}

// ListDir lists a workspace directory ("." is the root) of a sandbox p owns.
func (h *Handler) ListDir(ctx context.Context, p service.Principal, id, path string) ([]service.DirEntry, error) {
	c, err := cleanWorkspacePath("path", path, true)
	if err != nil {
		return nil, err
	}
	t, err := h.running(ctx, id, p, sandboxes.CapFilesystem)
	if err != nil {
		return nil, err
	}
	entries, err := h.cfg.Agent.ListDir(ctx, t, c)
	if entries == nil && err == nil {
		entries = []service.DirEntry{}
	}
	return entries, err
}

// IssueTicket mints a one-time ticket for a browser route (scope) of a sandbox p owns.
func (h *Handler) IssueTicket(ctx context.Context, p service.Principal, id, scope string, write bool, ttl time.Duration) (service.Ticket, error) {
	if h.cfg.Tickets == nil {
		return service.Ticket{}, service.Errorf(service.CodeCapability, "tickets are not configured on this gateway").
			With("capability", "tickets").With("available", []string{})
	}
	valid := false
	for _, s := range TicketScopes {
		valid = valid || s == scope
	}
	if !valid {
		return service.Ticket{}, service.Errorf(service.CodeValidation, "scope must be one of %s", strings.Join(TicketScopes, ", "))
	}
	sb, err := h.unexpired(ctx, id, p)
	if err != nil {
		return service.Ticket{}, err
	}
	return h.cfg.Tickets.Issue(ctx, service.TicketRequest{SandboxID: id, Owner: sb.Owner, Scope: scope, Write: write, TTL: ttl})
}

// Browse runs one browser action on the Chromium of a sandbox p owns.
func (h *Handler) Browse(ctx context.Context, p service.Principal, id string, req service.BrowserRequest) (service.BrowserResult, error) {
	t, err := h.running(ctx, id, p, sandboxes.CapBrowser)
	if err != nil {
		return service.BrowserResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, req.Timeout+agentGrace)
	defer cancel()
	return h.cfg.Agent.Browser(ctx, t, req)
}

// ExportFiles registers workspace paths of a sandbox p owns as importable by p's other sandboxes.
func (h *Handler) ExportFiles(ctx context.Context, p service.Principal, id string, paths []string) ([]Export, error) {
	if len(paths) == 0 || len(paths) > 1000 {
		return nil, service.Errorf(service.CodeValidation, "paths must list 1 to 1000 workspace paths")
	}
	sb, err := h.visible(ctx, id, p)
	if err != nil {
		return nil, err
	}
	now := h.cfg.Now().UTC()
	es := make([]Export, 0, len(paths))
	for _, raw := range paths {
		c, err := cleanWorkspacePath("paths", raw, false)
		if err != nil {
			return nil, err
		}
		es = append(es, Export{SandboxID: sb.ID, Path: c, Owner: sb.Owner, ExportedAt: now})
	}
	if err := h.cfg.Store.putExports(es); err != nil {
		return nil, fmt.Errorf("recording exports: %w", err)
	}
	return es, nil
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
func (h *Handler) ImportFile(ctx context.Context, p service.Principal, id string, req ImportParams) (Imported, error) {
	body, source, base, err := h.importSource(ctx, p, id, req)
	if err != nil {
		return Imported{}, err
	}
	defer body.Close()
	dest := req.Destination
	if dest == "" {
		dest = base
	}
	dst, err := cleanWorkspacePath("destination", dest, false)
	if err != nil {
		return Imported{}, err
	}
	t, err := h.running(ctx, id, p, sandboxes.CapFilesystem)
	if err != nil {
		return Imported{}, err
	}
	capped := &cappedReader{r: body, max: h.cfg.MaxUploadBytes}
	n, err := h.cfg.Agent.Upload(ctx, t, dst, capped)
	if capped.n > h.cfg.MaxUploadBytes || errors.Is(err, errTooLarge) {
		return Imported{}, tooLarge(h.cfg.MaxUploadBytes)
	}
	if err != nil {
		return Imported{}, err
	}
	return Imported{Path: dst, Size: n, Source: source}, nil
}
