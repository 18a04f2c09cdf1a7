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

// The cache is bounded twice: maxIdempotencyEntries for the process, and maxIdempotencyPerOwner for one owner, so
// a client sending endless distinct keys evicts its own oldest answers, never another owner's (issue 33). When the
// process bound is reached, the owner holding the most entries gives one up.
const (
	maxIdempotencyEntries  = 10000
	maxIdempotencyPerOwner = 1000
)

// idempotencyCache replays the first answer to a keyed request for ttl (Bay: 1 h). The same key with a different
// body is a 409 conflict. It is per process: a restart forgets keys, as a client retrying across a restart of the
// gateway gets a fresh operation.
type idempotencyCache struct {
	ttl      time.Duration
	now      func() time.Time
	max      int
	perOwner int
	mu       sync.Mutex
	owners   map[string]map[string]*idemEntry // owner -> "METHOD path NUL key" -> entry
	total    int
}

type idemEntry struct {
	bodyHash string
	done     chan struct{}
	status   int
	body     []byte
	expires  time.Time
}

func newIdempotencyCache(ttl time.Duration, now func() time.Time) *idempotencyCache {
	return &idempotencyCache{ttl: ttl, now: now, max: maxIdempotencyEntries, perOwner: maxIdempotencyPerOwner,
		owners: map[string]map[string]*idemEntry{}}
}

// lookupLocked returns an owner's live entry for k, first dropping that owner's expired answers.
func (c *idempotencyCache) lookupLocked(owner, k string, now time.Time) *idemEntry {
	for ok, e := range c.owners[owner] {
		if isClosed(e.done) && now.After(e.expires) {
			c.deleteLocked(owner, ok)
		}
	}
	return c.owners[owner][k]
}

// addLocked stores a new in-flight entry, evicting within the owner first and then from the largest owner.
func (c *idempotencyCache) addLocked(owner, k string, e *idemEntry) {
	if len(c.owners[owner]) >= c.perOwner {
		c.evictOldestLocked(owner)
	}
	if c.total >= c.max {
		largest := ""
		for o, es := range c.owners {
			if largest == "" || len(es) > len(c.owners[largest]) {
				largest = o
			}
		}
		c.evictOldestLocked(largest)
	}
	if c.owners[owner] == nil {
		c.owners[owner] = map[string]*idemEntry{}
	}
	c.owners[owner][k] = e
	c.total++
}

func (c *idempotencyCache) deleteLocked(owner, k string) {
	es := c.owners[owner]
	if _, ok := es[k]; !ok {
		return
	}
	delete(es, k)
	c.total--
	if len(es) == 0 {
		delete(c.owners, owner)
	}
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
	ck := r.Method + " " + r.URL.Path + "\x00" + key

	c := h.idem
	c.mu.Lock()
	if e := c.lookupLocked(p.Owner, ck, c.now()); e != nil {
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
	e := &idemEntry{bodyHash: bodyHash, done: make(chan struct{})}
	c.addLocked(p.Owner, ck, e)
	c.mu.Unlock()

	rec := &recorder{ResponseWriter: w}
	op(rec, r)
	c.mu.Lock()
	if rec.status >= 200 && rec.status < 300 {
		e.status, e.body, e.expires = rec.status, rec.buf.Bytes(), c.now().Add(c.ttl)
	} else if c.owners[p.Owner][ck] == e {
		c.deleteLocked(p.Owner, ck)
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

// evictOldestLocked drops the owner's finished entry that expires first (in-flight ones are never dropped).
func (c *idempotencyCache) evictOldestLocked(owner string) {
	var oldest string
	var at time.Time
	for k, e := range c.owners[owner] {
		if isClosed(e.done) && (oldest == "" || e.expires.Before(at)) {
			oldest, at = k, e.expires
		}
	}
	if oldest != "" {
		c.deleteLocked(owner, oldest)
	}
}
