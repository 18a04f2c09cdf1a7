package execd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/files"
)

// maxReplaceBytes caps the files replace loads whole.
const maxReplaceBytes = 16 << 20

// MaxSearchResults and MaxListEntries bound one answer; past them search stops and says so in a header, list
// refuses (ask for less depth).
const (
	MaxSearchResults = 10000
	MaxListEntries   = 100000
	TruncatedHeader  = "X-Sandgate-Truncated"
)

// osError maps a file-system error on p (as the caller gave it) onto execd's codes.
func osError(doing, p string, err error) error {
	var ae *agentapi.Error
	var ee *Error
	if errors.As(err, &ae) || errors.As(err, &ee) {
		return err
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(http.StatusNotFound, agentapi.ExecdCodeFileNotFound, "file not found: %s", p)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return errorf(http.StatusForbidden, agentapi.ExecdCodeRuntimeError, "%s %s: %s", doing, p, msg)
	}
	return errorf(http.StatusInternalServerError, agentapi.ExecdCodeRuntimeError, "%s %s: %s", doing, p, msg)
}

// fileInfo describes abs as execd does: type, size, times, owner and group names, mode as octal digits.
func fileInfo(abs string, fi fs.FileInfo) agentapi.ExecdFileInfo {
	info := agentapi.ExecdFileInfo{Path: abs, Type: fileType(fi), Size: fi.Size(), ModifiedAt: fi.ModTime(), CreatedAt: fi.ModTime()}
	mode, _ := strconv.Atoi(strconv.FormatUint(uint64(fi.Mode().Perm()), 8))
	info.Mode = mode
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.CreatedAt = time.Unix(st.Ctim.Unix())
		info.Owner = strconv.FormatUint(uint64(st.Uid), 10)
		if u, err := user.LookupId(info.Owner); err == nil {
			info.Owner = u.Username
		}
		info.Group = strconv.FormatUint(uint64(st.Gid), 10)
		if g, err := user.LookupGroupId(info.Group); err == nil {
			info.Group = g.Name
		}
	}
	return info
}

func fileType(fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	case fi.IsDir():
		return "directory"
	case fi.Mode().IsRegular():
		return "file"
	}
	return "other"
}

// filesInfo answers a map of each asked path (as given) to its info; one missing path fails the batch with 404.
func (a *API) filesInfo(w http.ResponseWriter, r *http.Request) {
	out := map[string]agentapi.ExecdFileInfo{}
	for _, p := range r.URL.Query()["path"] {
		info, err := a.info(p)
		if err != nil {
			writeError(w, err)
			return
		}
		out[p] = info
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) info(p string) (agentapi.ExecdFileInfo, error) {
	abs, err := a.locate(p, a.resolveEntry)
	if err != nil {
		return agentapi.ExecdFileInfo{}, err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return agentapi.ExecdFileInfo{}, osError("stat", p, err)
	}
	return fileInfo(abs, fi), nil
}

// removeFiles deletes files (not directories); a missing one is no error, as in execd.
func (a *API) removeFiles(w http.ResponseWriter, r *http.Request) {
	for _, p := range r.URL.Query()["path"] {
		abs, err := a.locate(p, a.Files.Root().ResolveParent)
		if err != nil {
			writeError(w, err)
			return
		}
		fi, err := os.Lstat(abs)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && fi.IsDir() {
			err = errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "error removing file %s: path is a directory (use DELETE /directories)", p)
		}
		if err == nil {
			err = os.Remove(abs)
		}
		if err != nil {
			writeError(w, osError("removing", p, err))
			return
		}
	}
	ok(w)
}

// ParseMode reads execd's mode: octal digits written as a decimal number (755 is 0755); 0 means none.
func ParseMode(mode int) (*os.FileMode, error) {
	if mode == 0 {
		return nil, nil
	}
	m, err := files.ParseMode(strconv.Itoa(mode))
	if err != nil || mode < 0 {
		return nil, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "mode %d: want octal digits such as 644 or 755", mode)
	}
	return m, nil
}

// applyPermission sets mode (if any) and ownership (if asked; the agent can only give files to its own user, so
// another owner fails with the file system's refusal).
func applyPermission(abs, p string, perm agentapi.ExecdPermission) error {
	mode, err := ParseMode(perm.Mode)
	if err != nil {
		return err
	}
	if mode != nil {
		if err := os.Chmod(abs, *mode); err != nil {
			return osError("changing the mode of", p, err)
		}
	}
	if perm.Owner == "" && perm.Group == "" {
		return nil
	}
	uid, gid := -1, -1
	if perm.Owner != "" {
		u, err := user.Lookup(perm.Owner)
		if err != nil {
			return errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "owner %q: %v", perm.Owner, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
	}
	if perm.Group != "" {
		g, err := user.LookupGroup(perm.Group)
		if err != nil {
			return errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "group %q: %v", perm.Group, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	if err := os.Lchown(abs, uid, gid); err != nil {
		return osError("changing the owner of", p, err)
	}
	return nil
}

// chmodFiles applies {path: {owner, group, mode}}.
func (a *API) chmodFiles(w http.ResponseWriter, r *http.Request) {
	eachPermission(w, r, func(p string, perm agentapi.ExecdPermission) error {
		abs, err := a.locate(p, a.Files.Root().Resolve)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return osError("changing permissions of", p, err)
		}
		return applyPermission(abs, p, perm)
	})
}

// eachPermission decodes a {path: {owner, group, mode}} body and runs do on each entry, answering the first
// error, or success once all are done.
func eachPermission(w http.ResponseWriter, r *http.Request, do func(p string, perm agentapi.ExecdPermission) error) {
	var req map[string]agentapi.ExecdPermission
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	for p, perm := range req {
		if err := do(p, perm); err != nil {
			writeError(w, err)
			return
		}
	}
	ok(w)
}

// moveFiles renames [{src, dest}] in order; parents of dest are created; an existing dest is refused.
func (a *API) moveFiles(w http.ResponseWriter, r *http.Request) {
	var req []agentapi.ExecdRenameItem
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	for _, it := range req {
		if it.Src == "" || it.Dest == "" {
			writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "src and dest are required"))
			return
		}
		src, err := a.expand(it.Src)
		if err != nil {
			writeError(w, err)
			return
		}
		dest, err := a.expand(it.Dest)
		if err != nil {
			writeError(w, err)
			return
		}
		if _, err := a.Files.Move(agentapi.MoveRequest{From: src, To: dest}); err != nil {
			writeError(w, err)
			return
		}
	}
	ok(w)
}

// searchFiles finds files (not directories) under path whose name matches pattern (doublestar syntax, against
// the file's name; default "**"). Symlinked directories are not followed.
func (a *API) searchFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var pattern string
	p, base, err := a.queryPath(q, a.Files.Root().Resolve, func() (err error) {
		pattern, err = CheckPattern(q.Get("pattern"))
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := os.Stat(base); err != nil {
		writeError(w, osError("searching", p, err))
		return
	}
	out := []agentapi.ExecdFileInfo{}
	truncated := false
	err = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip it, search the rest
		}
		if rerr := r.Context().Err(); rerr != nil {
			return rerr
		}
		if d.IsDir() || !doublestar.MatchUnvalidated(pattern, d.Name()) {
			return nil
		}
		if len(out) >= MaxSearchResults {
			truncated = true
			return filepath.SkipAll
		}
		if fi, ierr := d.Info(); ierr == nil {
			out = append(out, fileInfo(path, fi))
		}
		return nil
	})
	if err != nil {
		writeError(w, osError("searching", p, err))
		return
	}
	if truncated {
		w.Header().Set(TruncatedHeader, strconv.Itoa(MaxSearchResults))
	}
	writeJSON(w, http.StatusOK, out)
}

// CheckPattern validates a search pattern ("" is "**", everything).
func CheckPattern(pattern string) (string, error) {
	if pattern == "" {
		return "**", nil
	}
	if !doublestar.ValidatePattern(pattern) {
		return "", errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid pattern %q", pattern)
	}
	return pattern, nil
}

// replaceContent replaces every occurrence of old by new in each file, atomically per file (the write is refused
// if the file changed meanwhile); ?verbose=true answers the counts.
func (a *API) replaceContent(w http.ResponseWriter, r *http.Request) {
	var req map[string]agentapi.ExecdReplaceItem
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	results := map[string]agentapi.ExecdReplaceResult{}
	for p, it := range req {
		if it.Old == "" {
			writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "old content must not be empty"))
			return
		}
		n, err := a.replaceIn(r, p, it)
		if err != nil {
			writeError(w, err)
			return
		}
		results[p] = agentapi.ExecdReplaceResult{ReplacedCount: n}
	}
	if r.URL.Query().Get("verbose") == "true" {
		writeJSON(w, http.StatusOK, results)
		return
	}
	ok(w)
}

func (a *API) replaceIn(r *http.Request, p string, it agentapi.ExecdReplaceItem) (int, error) {
	x, err := a.expand(p)
	if err != nil {
		return 0, err
	}
	f, fi, err := a.Files.Open(x)
	if err != nil {
		return 0, err
	}
	if fi.Size() > maxReplaceBytes {
		f.Close()
		return 0, errorf(http.StatusRequestEntityTooLarge, agentapi.ExecdCodeInvalidFileContent, "%s is larger than %d bytes", p, maxReplaceBytes)
	}
	content, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return 0, osError("reading", p, err)
	}
	n := strings.Count(string(content), it.Old)
	if n == 0 {
		return 0, nil
	}
	updated := strings.ReplaceAll(string(content), it.Old, it.New)
	_, err = a.Files.WriteFile(r.Context(), x, strings.NewReader(updated), files.WriteOptions{IfMatch: files.ETag(fi), Size: int64(len(updated))})
	return n, err
}

// download serves a file: whole or with Range (206), or the lines offset/limit select as text (the two are
// exclusive).
func (a *API) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		writeError(w, missingQuery("path"))
		return
	}
	rawOffset, rawLimit := q.Get("offset"), q.Get("limit")
	lineMode := rawOffset != "" || rawLimit != ""
	if lineMode && r.Header.Get("Range") != "" {
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "line-based reading (offset/limit) and byte range (Range header) are mutually exclusive"))
		return
	}
	lr, err := ParseLineRange(rawOffset, rawLimit)
	if err != nil {
		writeError(w, err)
		return
	}
	x, err := a.expand(p)
	if err != nil {
		writeError(w, err)
		return
	}
	f, fi, err := a.Files.Open(x)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	if lineMode {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_ = CopyLines(w, f, lr) // headers are sent: a failure can only cut the body
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", contentDisposition(fi.Name()))
	w.Header().Set("ETag", files.ETag(fi))
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

// contentDisposition names the file for a download (RFC 6266, with RFC 5987 for names that are not ASCII).
func contentDisposition(name string) string {
	ascii := true
	for _, c := range name {
		if c > 127 || c < 32 || c == '"' || c == '\\' {
			ascii = false
			break
		}
	}
	if ascii {
		return `attachment; filename="` + name + `"`
	}
	enc := url.PathEscape(name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, enc, enc)
}
