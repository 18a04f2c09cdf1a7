package envd

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
)

// maxParts bounds the parts of one multipart upload (files and skipped parts).
const maxParts = 1000

// eachFilePart calls fn for every part named "file" with its filename as sent. E2B's SDK puts the full
// destination path in the filename; Go's Part.FileName keeps only the base name, so the Content-Disposition
// header is read here. Other parts are skipped, as envd skips them.
func eachFilePart(mr *multipart.Reader, limit int, fn func(filename string, body io.Reader) error) error {
	for i := 0; ; i++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return httpErrorf(http.StatusBadRequest, "the multipart body cannot be read: %v", err)
		}
		if i >= limit {
			part.Close()
			return httpErrorf(http.StatusBadRequest, "more than %d parts", limit)
		}
		name, filename, err := partNames(part.Header.Get("Content-Disposition"))
		if err != nil {
			part.Close()
			return httpErrorf(http.StatusBadRequest, "a part's Content-Disposition cannot be read: %v", err)
		}
		if name != "file" {
			part.Close()
			continue
		}
		err = fn(filename, part)
		part.Close()
		if err != nil {
			return err
		}
	}
}

// partNames reads a part's form name and filename, unabridged.
func partNames(disposition string) (string, string, error) {
	kind, params, err := mime.ParseMediaType(disposition)
	if err != nil {
		return "", "", err
	}
	if kind != "form-data" {
		return "", "", errors.New("not form-data")
	}
	return params["name"], params["filename"], nil
}
