package ideagent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	agentws "github.com/sandgate/sandgate/agentimage/internal/workspace"
)

var (
	errEscape   = errors.New("path escapes the workspace")
	errRoot     = errors.New("the workspace root cannot be deleted or moved")
	errConflict = errors.New("file changed since it was read")
	errTooLarge = errors.New("file is larger than the IDE agent's limit")
	errExists   = errors.New("destination already exists")
)

// workspace confines every path to one root through the agent's shared resolver: paths are workspace-relative (a
// leading / is dropped, `..` stops at the root), and no symlink may lead outside.
type workspace struct {
	root *agentws.Root
	real string // the root with symlinks resolved
}

func newWorkspace(root string) (*workspace, error) {
	r, err := agentws.NewRelative(root)
	if err != nil {
		return nil, fmt.Errorf("resolving workspace %s: %w", root, err)
	}
	return &workspace{root: r, real: r.Dir()}, nil
}

// resolve maps a client path to an absolute path inside the workspace and its clean relative form. The absolute
// path keeps the client's last element as named (a symlink in the workspace stays a symlink); the resolver has
// checked that wherever it leads is inside.
func (w *workspace) resolve(p string) (abs, rel string, err error) {
	if strings.ContainsRune(p, 0) {
		return "", "", errEscape
	}
	if _, err := w.root.Resolve(p); err != nil {
		if errors.Is(err, agentws.ErrOutside) {
			return "", "", errEscape
		}
		return "", "", err
	}
	rel = filepath.Clean("/" + p)[1:]
	if rel == "" {
		rel = "."
	}
	return filepath.Join(w.real, rel), rel, nil
}

// relOf is the workspace-relative form of an absolute path under the root.
func (w *workspace) relOf(abs string) string { return w.root.Rel(abs) }

type dirEntry struct {
	Name  string `json:"name"`
	IsDir bool   `json:"is_dir"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
}

func (w *workspace) readDir(p string) ([]dirEntry, error) {
	abs, _, err := w.resolve(p)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	out := make([]dirEntry, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		isDir := info.IsDir()
		if info.Mode()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(filepath.Join(abs, e.Name())); err == nil {
				isDir = st.IsDir()
			}
		}
		out = append(out, dirEntry{Name: e.Name(), IsDir: isDir, Size: info.Size(), Mtime: info.ModTime().Unix()})
	}
	sortEntries(out)
	return out, nil
}

func sortEntries(es []dirEntry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].IsDir != es[j].IsDir {
			return es[i].IsDir
		}
		return es[i].Name < es[j].Name
	})
}

// treeNode is one entry of fs/read_dir_recursive.
type treeNode struct {
	Name     string      `json:"name"`
	Type     string      `json:"type"`
	Size     int64       `json:"size"`
	Mtime    int64       `json:"mtime"`
	Path     string      `json:"path"`
	Level    int         `json:"level"`
	Children []*treeNode `json:"children,omitempty"`
	Loaded   *bool       `json:"loaded,omitempty"`
}

type treeResult struct {
	Files         []*treeNode `json:"files"`
	ExpandedPaths []string    `json:"expandedPaths"`
}

var defaultExcludeNames = []string{"node_modules", ".git", ".next", "dist", "build", ".bun"}

const maxTreeEntries = 20000

// readDirRecursive lists p down to maxDepth levels; excluded directories and those at the depth limit are listed
// but not opened (loaded: false).
func (w *workspace) readDirRecursive(p string, maxDepth int, exclude []string) (*treeResult, error) {
	abs, rel, err := w.resolve(p)
	if err != nil {
		return nil, err
	}
	excluded := map[string]bool{}
	for _, n := range exclude {
		excluded[n] = true
	}
	res := &treeResult{Files: []*treeNode{}, ExpandedPaths: []string{}}
	count := 0
	var walk func(dirAbs, dirRel string, level int) ([]*treeNode, error)
	walk = func(dirAbs, dirRel string, level int) ([]*treeNode, error) {
		entries, err := os.ReadDir(dirAbs)
		if err != nil {
			return nil, err
		}
		if dirRel != "." {
			res.ExpandedPaths = append(res.ExpandedPaths, dirRel)
		}
		var nodes []*treeNode
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				continue
			}
			count++
			if count > maxTreeEntries {
				break
			}
			childRel := e.Name()
			if dirRel != "." {
				childRel = dirRel + "/" + e.Name()
			}
			n := &treeNode{Name: e.Name(), Type: "file", Size: info.Size(), Mtime: info.ModTime().Unix(), Path: childRel, Level: level}
			if info.IsDir() {
				n.Type = "directory"
				loaded := false
				if !excluded[e.Name()] && level+1 < maxDepth {
					if kids, err := walk(filepath.Join(dirAbs, e.Name()), childRel, level+1); err == nil {
						n.Children, loaded = kids, true
						if n.Children == nil {
							n.Children = []*treeNode{}
						}
					}
				}
				n.Loaded = &loaded
			}
			nodes = append(nodes, n)
		}
		sort.SliceStable(nodes, func(i, j int) bool {
			if (nodes[i].Type == "directory") != (nodes[j].Type == "directory") {
				return nodes[i].Type == "directory"
			}
			return nodes[i].Name < nodes[j].Name
		})
		return nodes, nil
	}
	files, err := walk(abs, rel, 0)
	if err != nil {
		return nil, err
	}
	if files != nil {
		res.Files = files
	}
	return res, nil
}

type fileContent struct {
	Data  []byte
	Mtime int64
	Etag  string
}

func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (w *workspace) readFile(p string, limit int64) (*fileContent, error) {
	abs, _, err := w.resolve(p)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", p)
	}
	if st.Size() > limit {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return &fileContent{Data: b, Mtime: st.ModTime().Unix(), Etag: etagOf(b)}, nil
}

type writeResult struct {
	Etag  string `json:"etag"`
	Mtime int64  `json:"mtime"`
	Size  int64  `json:"size"`
}

// writeFile replaces a file atomically (temp file and rename, keeping its mode). Overwriting an existing file
// needs oldEtag to match its current content; creating one needs no etag.
func (w *workspace) writeFile(p string, data []byte, oldEtag *string, limit int64) (*writeResult, error) {
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	abs, rel, err := w.resolve(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, fmt.Errorf("cannot write the workspace root")
	}
	mode := fs.FileMode(0o644)
	current, err := os.ReadFile(abs)
	switch {
	case err == nil:
		if oldEtag == nil || *oldEtag != etagOf(current) {
			return nil, errConflict
		}
		if st, err := os.Stat(abs); err == nil {
			mode = st.Mode().Perm()
		}
	case errors.Is(err, fs.ErrNotExist):
		if oldEtag != nil && *oldEtag != "" {
			return nil, errConflict // it existed when the editor loaded it
		}
	default:
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".ide-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	return &writeResult{Etag: etagOf(data), Mtime: st.ModTime().Unix(), Size: st.Size()}, nil
}

func (w *workspace) mkdir(p string) error {
	abs, _, err := w.resolve(p)
	if err != nil {
		return err
	}
	return os.MkdirAll(abs, 0o755)
}

func (w *workspace) remove(p string) error {
	abs, rel, err := w.resolve(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return errRoot
	}
	if _, err := os.Lstat(abs); err != nil {
		return err
	}
	return os.RemoveAll(abs)
}

func (w *workspace) move(from, to string) error {
	fromAbs, fromRel, err := w.resolve(from)
	if err != nil {
		return err
	}
	toAbs, toRel, err := w.resolve(to)
	if err != nil {
		return err
	}
	if fromRel == "." || toRel == "." {
		return errRoot
	}
	if _, err := os.Lstat(fromAbs); err != nil {
		return err
	}
	if _, err := os.Lstat(toAbs); err == nil {
		return errExists
	}
	if err := os.MkdirAll(filepath.Dir(toAbs), 0o755); err != nil {
		return err
	}
	return os.Rename(fromAbs, toAbs)
}
