package bayapi

import (
	"context"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

func (h *Handler) fileTools() (service.FileTools, error) {
	ft, ok := h.cfg.Agent.(service.FileTools)
	if !ok {
		return nil, service.Errorf(service.CodeCapability, "this gateway's agent client does not edit or search files").
			With("capability", "file_tools").With("available", []string{})
	}
	return ft, nil
}

// EditFile replaces text in a workspace file of a sandbox p owns: req.Old must occur exactly once unless
// req.ReplaceAll.
func (h *Handler) EditFile(ctx context.Context, p service.Principal, id string, req agentapi.EditRequest) (agentapi.EditResult, error) {
	ft, err := h.fileTools()
	if err != nil {
		return agentapi.EditResult{}, err
	}
	if req.Path, err = cleanWorkspacePath("path", req.Path, false); err != nil {
		return agentapi.EditResult{}, err
	}
	if req.Old == "" {
		return agentapi.EditResult{}, service.Errorf(service.CodeValidation, "the text to replace must not be empty")
	}
	t, err := h.running(ctx, id, p, sandboxes.CapFilesystem)
	if err != nil {
		return agentapi.EditResult{}, err
	}
	return ft.Edit(ctx, t, req)
}

// SearchFiles greps the workspace (or req.Path inside it) of a sandbox p owns.
func (h *Handler) SearchFiles(ctx context.Context, p service.Principal, id string, req agentapi.GrepRequest) (agentapi.GrepResult, error) {
	ft, err := h.fileTools()
	if err != nil {
		return agentapi.GrepResult{}, err
	}
	if req.Path == "" {
		req.Path = "."
	}
	if req.Path, err = cleanWorkspacePath("path", req.Path, true); err != nil {
		return agentapi.GrepResult{}, err
	}
	if req.Pattern == "" {
		return agentapi.GrepResult{}, service.Errorf(service.CodeValidation, "the pattern must not be empty")
	}
	t, err := h.running(ctx, id, p, sandboxes.CapFilesystem)
	if err != nil {
		return agentapi.GrepResult{}, err
	}
	return ft.Grep(ctx, t, req)
}

// Profiles lists the profiles a sandbox can be created from.
func (h *Handler) Profiles() []sandboxes.Profile { return h.cfg.Sandboxes.Profiles() }
