package execd

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// parseDepth reads the depth of a listing: 1 (direct entries) when absent, 0 lists nothing.
func parseDepth(s string) (int, error) {
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid query parameter 'depth': %s", s)
	}
	return n, nil
}

// listDirectory lists a directory to depth levels, depth first in name order, never following symlinks (a
// symlink as the listed path itself is refused, as in execd).
func (a *API) listDirectory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var depth int
	p, abs, err := a.queryPath(q, a.resolveEntry, func() (err error) {
		depth, err = parseDepth(q.Get("depth"))
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	fi, err := os.Lstat(abs)
	switch {
	case err != nil:
		writeError(w, osError("listing", p, err))
		return
	case fi.Mode()&fs.ModeSymlink != 0:
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "path is a symbolic link, refusing to traverse: %s", p))
		return
	case !fi.IsDir():
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "path is not a directory: %s", p))
		return
	}
	entries := []agentapi.ExecdFileInfo{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return osError("listing", dir, err)
		}
		for _, de := range des {
			if err := r.Context().Err(); err != nil {
				return err
			}
			if len(entries) >= MaxListEntries {
				return errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "%s holds more than %d entries to depth %d: ask for less depth", p, MaxListEntries, depth)
			}
			full := filepath.Join(dir, de.Name())
			info, err := de.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			if err != nil {
				return osError("listing", full, err)
			}
			entries = append(entries, fileInfo(full, info))
			if de.IsDir() && level+1 < depth {
				if err := walk(full, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if depth > 0 {
		if err := walk(abs, 0); err != nil {
			writeError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, entries)
}

// makeDirs creates {path: {owner, group, mode}} with parents; the permission applies to a directory it created.
func (a *API) makeDirs(w http.ResponseWriter, r *http.Request) {
	eachPermission(w, r, func(p string, perm agentapi.ExecdPermission) error {
		x, err := a.expand(p)
		if err != nil {
			return err
		}
		if _, err := ParseMode(perm.Mode); err != nil {
			return err
		}
		abs, err := a.Files.Root().Resolve(x)
		if err != nil {
			return err
		}
		_, statErr := os.Stat(abs)
		if _, err := a.Files.Mkdir(agentapi.MkdirRequest{Path: x}); err != nil {
			return err
		}
		if statErr == nil {
			return nil
		}
		return applyPermission(abs, p, perm)
	})
}

// removeDirs removes directories with everything in them; a missing one is no error. The workspace and home
// themselves cannot be removed.
func (a *API) removeDirs(w http.ResponseWriter, r *http.Request) {
	for _, p := range r.URL.Query()["path"] {
		x, err := a.expand(p)
		if err != nil {
			writeError(w, err)
			return
		}
		err = a.Files.Remove(agentapi.RemoveRequest{Path: x, Recursive: true})
		var ae *agentapi.Error
		if errors.As(err, &ae) && ae.Code == agentapi.CodeFileNotFound {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	ok(w)
}
