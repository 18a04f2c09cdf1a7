package bayapi

import (
	"path"
	"strings"
)

// WorkspaceRoot is where paths of the API are relative to.
const WorkspaceRoot = "/workspace"

// cleanWorkspacePath checks a path as Bay's validators/path.py does: relative to /workspace; empty, absolute
// (including /workspace/x), NUL-carrying or escaping paths are refused with invalid_path. It returns the cleaned
// relative path ("." for the root).
func cleanWorkspacePath(p string, allowRoot bool) (string, error) {
	if p == "" || strings.TrimSpace(p) == "" {
		return "", errorf(CodeInvalidPath, "path must not be empty").with("path", p)
	}
	if strings.ContainsRune(p, 0) {
		return "", errorf(CodeInvalidPath, "path must not contain NUL bytes").with("path", p)
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "\\") {
		return "", errorf(CodeInvalidPath, "absolute paths are not allowed; use a path relative to %s", WorkspaceRoot).with("path", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errorf(CodeInvalidPath, "path escapes the workspace").with("path", p)
	}
	if c == "." && !allowRoot {
		return "", errorf(CodeInvalidPath, "path must name a file inside the workspace").with("path", p)
	}
	return c, nil
}
