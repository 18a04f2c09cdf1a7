package execd

import (
	"encoding/json"
	"io"
	"net/http"
	"os"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/files"
)

// maxMetadataBytes caps one metadata part.
const maxMetadataBytes = 64 << 10

// Upload is one parsed metadata part: where its file goes and with what permission.
type Upload struct {
	Meta agentapi.ExecdFileMetadata
	Mode *os.FileMode
}

// ParseUploadMetadata reads a metadata part: JSON {path, owner, group, mode} with a path.
func ParseUploadMetadata(b []byte) (Upload, error) {
	var u Upload
	if len(b) > maxMetadataBytes {
		return u, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "metadata part over %d bytes", maxMetadataBytes)
	}
	if err := json.Unmarshal(b, &u.Meta); err != nil {
		return u, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "invalid metadata format. %v", err)
	}
	if u.Meta.Path == "" {
		return u, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "metadata path is empty")
	}
	mode, err := ParseMode(u.Meta.Mode)
	if err != nil {
		return u, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "%s", messageOf(err))
	}
	u.Mode = mode
	return u, nil
}

// upload writes multipart pairs: a `metadata` part (JSON) then the `file` part it describes, as the SDK sends them.
// Parts are streamed, never buffered whole; each file is written atomically (a temporary file renamed over the
// target), with its mode set before the rename. execd accepts the parts in any order because it buffers the form;
// here a file part must follow its metadata.
func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFile, "multipart form is empty: %v", err))
		return
	}
	var pending *Upload
	written := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFile, "reading the multipart body: %v", err))
			return
		}
		switch part.FormName() {
		case "metadata":
			if pending != nil {
				writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFile, "metadata and file count mismatch: metadata for %s has no file part", pending.Meta.Path))
				return
			}
			b, err := io.ReadAll(io.LimitReader(part, maxMetadataBytes+1))
			if err != nil {
				writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "error reading metadata content. %v", err))
				return
			}
			u, err := ParseUploadMetadata(b)
			if err != nil {
				writeError(w, err)
				return
			}
			pending = &u
		case "file":
			if pending == nil {
				writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "metadata file is missing (a metadata part must precede each file part)"))
				return
			}
			if err := a.writeUpload(r, *pending, part); err != nil {
				writeError(w, err)
				return
			}
			pending = nil
			written++
		}
		part.Close()
	}
	switch {
	case pending != nil:
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileContent, "file is missing for %s", pending.Meta.Path))
	case written == 0:
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidFileMetadata, "metadata file is missing"))
	default:
		ok(w)
	}
}

func (a *API) writeUpload(r *http.Request, u Upload, body io.Reader) error {
	p, err := a.expand(u.Meta.Path)
	if err != nil {
		return err
	}
	if _, err := a.Files.WriteFile(r.Context(), p, body, files.WriteOptions{Mode: u.Mode, Size: -1}); err != nil {
		return err
	}
	if u.Meta.Owner == "" && u.Meta.Group == "" {
		return nil
	}
	abs, err := a.Files.Root().Resolve(p)
	if err != nil {
		return err
	}
	return applyPermission(abs, u.Meta.Path, agentapi.ExecdPermission{Owner: u.Meta.Owner, Group: u.Meta.Group})
}
