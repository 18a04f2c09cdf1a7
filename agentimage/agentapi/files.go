package agentapi

// Files routes: GET /v1/files?path= (download; Range, ETag, If-None-Match), PUT /v1/files?path=&mode= (raw body,
// atomic; If-Match), POST /v1/files/upload (multipart: field "path" then field "file", repeatable).
const (
	QueryPath = "path"
	// QueryMode is an octal file mode for PUT ("0644"); default 0644.
	QueryMode = "mode"
	// EnvMaxFileBytes caps a single upload in bytes (default DefaultMaxFileBytes).
	EnvMaxFileBytes     = "SANDGATE_MAX_FILE_BYTES"
	DefaultMaxFileBytes = 1 << 30
	// UploadFieldPath and UploadFieldFile are the multipart field names of POST /v1/files/upload.
	UploadFieldPath = "path"
	UploadFieldFile = "file"
)

// FileInfo describes a file or directory. Path is relative to the workspace root.
type FileInfo struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Mode       string `json:"mode"`
	IsDir      bool   `json:"is_dir"`
	IsSymlink  bool   `json:"is_symlink,omitempty"`
	ModTime    string `json:"mod_time"`
	ModTimeUnx int64  `json:"mod_time_unix"`
	// ETag is the file's current entity tag (files only), the same GET /v1/files sends.
	ETag string `json:"etag,omitempty"`
}

// WriteResult is the reply of PUT /v1/files and POST /v1/fs/write.
type WriteResult struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

// UploadResult is the reply of POST /v1/files/upload.
type UploadResult struct {
	Files []WriteResult `json:"files"`
}
