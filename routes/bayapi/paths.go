package bayapi

import (
	"path"
	"strings"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// WorkspaceRoot is where paths of the API are relative to.
const WorkspaceRoot = "/workspace"

// Reasons of an invalid_path error (details.reason), as Bay's validators/path.py names them.
const (
	PathReasonEmpty     = "empty_path"
	PathReasonNullByte  = "null_byte"
	PathReasonAbsolute  = "absolute_path"
	PathReasonTraversal = "path_traversal"
	// PathReasonRoot is ours: Bay lets "." through to the runtime, which then fails on a directory.
	PathReasonRoot = "workspace_root"
)

// cleanWorkspacePath checks a path as Bay's validators/path.py does: relative to /workspace; empty, absolute
// (including /workspace/x), NUL-carrying or escaping paths are refused with invalid_path, whose details are Bay's
// {field, reason}. field names the request field the path came from. It returns the cleaned relative path ("." for
// the root).
func cleanWorkspacePath(field, p string, allowRoot bool) (string, error) {
	invalid := func(reason, format string, args ...any) error {
		return service.Errorf(service.CodeInvalidPath, format, args...).With("field", field).With("reason", reason)
	}
	if p == "" || strings.TrimSpace(p) == "" {
		return "", invalid(PathReasonEmpty, "%s cannot be empty", field)
	}
	if strings.ContainsRune(p, 0) {
		return "", invalid(PathReasonNullByte, "%s contains invalid characters", field)
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "\\") {
		return "", invalid(PathReasonAbsolute, "%s must be a relative path (relative to %s)", field, WorkspaceRoot)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", invalid(PathReasonTraversal, "%s escapes workspace boundary", field)
	}
	if c == "." && !allowRoot {
		return "", invalid(PathReasonRoot, "%s must name a file inside the workspace", field)
	}
	return c, nil
}
