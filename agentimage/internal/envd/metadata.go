package envd

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// xattrPrefix is where E2B keeps a file's metadata: X-Metadata-<Key> on an upload becomes user.e2b.<key>.
	xattrPrefix = "user.e2b."
	// metadataHeader prefixes the upload headers that carry metadata.
	metadataHeader = "X-Metadata-"
	// maxMetadataKeys and maxMetadataBytes bound one file's metadata.
	maxMetadataKeys  = 64
	maxMetadataBytes = 16 << 10
)

// uploadMetadata reads X-Metadata-<Key>: <value> headers (keys lowercased, as envd stores them). Keys are HTTP
// tokens by construction; values must be printable ASCII, as E2B's SDK checks before sending.
func uploadMetadata(h http.Header) (map[string]string, error) {
	var md map[string]string
	size := 0
	for name, values := range h {
		rest, ok := strings.CutPrefix(http.CanonicalHeaderKey(name), metadataHeader)
		if !ok || len(values) == 0 {
			continue
		}
		key := strings.ToLower(rest)
		if key == "" {
			return nil, httpErrorf(http.StatusBadRequest, "a metadata header needs a key after %s", metadataHeader)
		}
		v := values[0]
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return nil, httpErrorf(http.StatusBadRequest, "metadata value of %q must be printable ASCII", key)
			}
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = v
		size += len(key) + len(v)
	}
	if len(md) > maxMetadataKeys || size > maxMetadataBytes {
		return nil, httpErrorf(http.StatusBadRequest, "metadata is limited to %d keys and %d bytes", maxMetadataKeys, maxMetadataBytes)
	}
	return md, nil
}

// setMetadata stores md as user.e2b.* extended attributes of the file at path.
func setMetadata(path string, md map[string]string) error {
	for k, v := range md {
		if err := unix.Setxattr(path, xattrPrefix+k, []byte(v), 0); err != nil {
			if errors.Is(err, syscall.ENOTSUP) {
				return httpErrorf(http.StatusBadRequest, "this sandbox's file system does not keep file metadata (extended attributes)")
			}
			return fmt.Errorf("storing metadata %q: %w", k, err)
		}
	}
	return nil
}

// readMetadata returns a file's user.e2b.* attributes with the prefix stripped; nil when it has none or the file
// system keeps none. A symlink's own attributes are read, never its target's.
func readMetadata(path string) map[string]string {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if errors.Is(err, syscall.ERANGE) {
		if n, err = unix.Llistxattr(path, nil); err == nil && n <= 1<<16 {
			buf = make([]byte, n)
			n, err = unix.Llistxattr(path, buf)
		}
	}
	if err != nil || n <= 0 {
		return nil
	}
	var md map[string]string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		key, ok := strings.CutPrefix(name, xattrPrefix)
		if !ok || key == "" || len(md) >= maxMetadataKeys {
			continue
		}
		val := make([]byte, maxMetadataBytes)
		vn, err := unix.Lgetxattr(path, name, val)
		if err != nil {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = string(val[:vn])
	}
	return md
}
