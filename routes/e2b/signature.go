package e2b

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// E2B's signed file URLs (reference/e2b.md §4.1): the SDK's uploadUrl() and downloadUrl() carry no header, only
// ?path=&username=&signature=v1_...[&signature_expiration=unix-seconds], where the signature is
// "v1_" + base64 (standard alphabet, no padding) of sha256("<path>:<read|write>:<username>:<token>[:<expiry>]") with
// the sandbox's envd access token. GET /files is a read, POST /files a write.

// fileSignature computes the signature of an operation on path.
func fileSignature(path, op, user, token string, expiry string) string {
	s := path + ":" + op + ":" + user + ":" + token
	if expiry != "" {
		s += ":" + expiry
	}
	sum := sha256.Sum256([]byte(s))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// SignedFileRequest reports whether a GET or POST /files request carries a valid, unexpired signature made with
// token. A bad query, an unknown operation or an expiry in the past is no signature.
func SignedFileRequest(method, rawQuery, token string, now time.Time) bool {
	var op string
	switch method {
	case http.MethodGet, http.MethodHead:
		op = "read"
	case http.MethodPost:
		op = "write"
	default:
		return false
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil || len(q["signature"]) != 1 || len(q["path"]) > 1 || len(q["username"]) > 1 || len(q["signature_expiration"]) > 1 {
		return false
	}
	exp := q.Get("signature_expiration")
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || n < now.Unix() {
			return false
		}
	}
	want := fileSignature(q.Get("path"), op, q.Get("username"), token, exp)
	return subtle.ConstantTimeCompare([]byte(q.Get("signature")), []byte(want)) == 1
}
