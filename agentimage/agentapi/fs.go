package agentapi

// JSON file helpers: POST /v1/fs/{stat,list,mkdir,move,copy,remove,read,write,edit,grep,glob}. Every path is
// relative to the workspace root, or absolute inside it.

// PathRequest is the body of stat.
type PathRequest struct {
	Path string `json:"path"`
}

// ListRequest is the body of list. Depth 1 (the default) lists the directory's entries; more descends.
type ListRequest struct {
	Path   string `json:"path"`
	Depth  int    `json:"depth,omitempty"`
	Hidden bool   `json:"hidden,omitempty"`
	// Limit caps the entries returned (default 1000).
	Limit int `json:"limit,omitempty"`
}

// ListResult is the reply of list.
type ListResult struct {
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// MkdirRequest is the body of mkdir; parents are always created.
type MkdirRequest struct {
	Path string `json:"path"`
	Mode string `json:"mode,omitempty"`
}

// MoveRequest is the body of move and copy. Without Overwrite an existing destination is a conflict.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// RemoveRequest is the body of remove. A non-empty directory needs Recursive.
type RemoveRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// ReadRequest is the body of read: Limit lines from line Offset (1-based; 0 means 1). Limit 0 means DefaultReadLines.
type ReadRequest struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// Read defaults.
const (
	DefaultReadLines   = 2000
	MaxReadLineBytes   = 2000
	MaxReadResultBytes = 256 << 10
)

// ReadResult is the reply of read.
type ReadResult struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// StartLine and EndLine are the 1-based lines Content holds (EndLine < StartLine when it holds none).
	StartLine  int `json:"start_line"`
	EndLine    int `json:"end_line"`
	TotalLines int `json:"total_lines"`
	// Truncated says lines exist past EndLine (or long lines were cut); Hint says how to read on.
	Truncated bool   `json:"truncated"`
	Hint      string `json:"hint,omitempty"`
}

// WriteRequest is the body of write. Empty Content writes an empty file.
type WriteRequest struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	Mode     string `json:"mode,omitempty"`
	// IfMatch, when set, must equal the file's current ETag (precondition_failed otherwise).
	IfMatch string `json:"if_match,omitempty"`
}

// EditRequest is the body of edit: replace Old by New. Old must occur exactly once unless ReplaceAll.
type EditRequest struct {
	Path       string `json:"path"`
	Old        string `json:"old"`
	New        string `json:"new"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// EditResult is the reply of edit.
type EditResult struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	ETag         string `json:"etag"`
}

// GrepRequest is the body of grep (ripgrep regular expressions).
type GrepRequest struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path,omitempty"`
	Glob            string `json:"glob,omitempty"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty"`
	ContextLines    int    `json:"context_lines,omitempty"`
	// Limit caps matches (default 500).
	Limit         int `json:"limit,omitempty"`
	MaxLineLength int `json:"max_line_length,omitempty"`
}

// GrepMatch is one matching (or context) line.
type GrepMatch struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Text    string `json:"text"`
	Context bool   `json:"context,omitempty"`
}

// GrepResult is the reply of grep.
type GrepResult struct {
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated"`
}

// GlobRequest is the body of glob: Pattern uses / separators and ** for any depth, relative to Path.
type GlobRequest struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// GlobResult is the reply of glob; paths are relative to the workspace root, sorted.
type GlobResult struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated"`
}

// OK is the reply of calls that return nothing else (mkdir, move, copy, remove, stdin, signal).
type OK struct {
	OK bool `json:"ok"`
}
