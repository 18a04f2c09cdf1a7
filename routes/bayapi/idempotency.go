package bayapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// idempotencyKeyPattern is the only key form Bay accepts.
var idempotencyKeyPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// maxIdempotencyEntries bounds the cache: a client sending endless distinct keys evicts the oldest answers
// rather than growing the gateway's memory.
const maxIdempotencyEntries = 10000

// idempotencyCache replays the first answer to a keyed request for ttl (Bay: 1 h). The same key with a different
// body is a 409 conflict. It is per process: a restart forgets keys, as a client retrying across a restart of the
// gateway gets a fresh operation.
type idempotencyCache struct {
	ttl     time.Duration
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]*idemEntry
}

type idemEntry struct {
	bodyHash string
	done     chan struct{}
	status   int
	body     []byte
	expires  time.Time
}

func newIdempotencyCache(ttl time.Duration, now func() time.Time) *idempotencyCache {
	return &idempotencyCache{ttl: ttl, now: now, entries: map[string]*idemEntry{}}
}

// recorder captures a JSON answer so it can be replayed.
type recorder struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (r *recorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.buf.Write(b)
	return r.ResponseWriter.Write(b)
}

// withIdempotency runs op once per (owner, route, Idempotency-Key). Only successful answers are kept: a failed
// attempt may be retried with the same key.
func (h *Handler) withIdempotency(w http.ResponseWriter, r *http.Request, p service.Principal, op func(http.ResponseWriter, *http.Request)) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		op(w, r)
		return
	}
	if !idempotencyKeyPattern.MatchString(key) {
		// Bay refuses a malformed key with 409 conflict and performs nothing.
		writeError(w, r, service.Errorf(service.CodeConflict, "Invalid Idempotency-Key format: must be 1-128 alphanumeric characters, dash, or underscore").With("key", key))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		writeError(w, r, service.Errorf(service.CodeValidation, "reading the request body: %v", err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	bodyHash := hex.EncodeToString(sum[:])
	ck := p.Owner + "\x00" + r.Method + " " + r.URL.Path + "\x00" + key

	c := h.idem
	c.mu.Lock()
	now := c.now()
	for k, e := range c.entries {
		if isClosed(e.done) && now.After(e.expires) {
			delete(c.entries, k)
		}
	}
	if e, ok := c.entries[ck]; ok {
		c.mu.Unlock()
		if e.bodyHash != bodyHash {
			writeError(w, r, service.Errorf(service.CodeConflict, "Idempotency-Key %q was used with a different request body", key))
			return
		}
		<-e.done
		if e.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(e.status)
			_, _ = w.Write(e.body)
			return
		}
		// The first attempt failed and was forgotten: run again.
		h.withIdempotency(w, r, p, op)
		return
	}
	if len(c.entries) >= maxIdempotencyEntries {
		c.evictOldestLocked()
	}
	e := &idemEntry{bodyHash: bodyHash, done: make(chan struct{})}
	c.entries[ck] = e
	c.mu.Unlock()

	rec := &recorder{ResponseWriter: w}
	op(rec, r)
	c.mu.Lock()
	if rec.status >= 200 && rec.status < 300 {
		e.status, e.body, e.expires = rec.status, rec.buf.Bytes(), c.now().Add(c.ttl)
	} else {
		delete(c.entries, ck)
	}
	close(e.done)
	c.mu.Unlock()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// evictOldestLocked drops the finished entry that expires first (in-flight ones are never dropped).
func (c *idempotencyCache) evictOldestLocked() {
	var oldest string
	var at time.Time
	for k, e := range c.entries {
		if isClosed(e.done) && (oldest == "" || e.expires.Before(at)) {
			oldest, at = k, e.expires
		}
	}
	if oldest != "" {
		delete(c.entries, oldest)
	}
}
