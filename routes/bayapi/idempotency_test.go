package bayapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// TestIdempotencyOwnerFlood is the attack of issue 33: owner A sends more distinct Idempotency-Keys than the whole
// cache holds. Owner B's answer, stored before the flood, must still be replayed afterwards (the old cache, one
// bound shared by all owners, evicted it), and A's entries stay within the per-owner bound.
func TestIdempotencyOwnerFlood(t *testing.T) {
	h := &Handler{idem: newIdempotencyCache(time.Hour, time.Now)}
	runs := map[string]int{}
	call := func(owner, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/sandboxes", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.withIdempotency(w, r, service.Principal{Owner: owner}, func(w http.ResponseWriter, _ *http.Request) {
			runs[owner+"/"+key]++
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"key":%q}`, key)
		})
		return w
	}
	call("bob", "b1")
	for i := range maxIdempotencyEntries + 500 {
		call("alice", fmt.Sprintf("flood-%d", i))
	}
	w := call("bob", "b1")
	if runs["bob/b1"] != 1 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("bob's key ran %d times after alice's flood (replayed %q)", runs["bob/b1"], w.Header().Get("Idempotent-Replayed"))
	}
	if n := len(h.idem.owners["alice"]); n > maxIdempotencyPerOwner {
		t.Errorf("alice holds %d entries, the per-owner bound is %d", n, maxIdempotencyPerOwner)
	}
	// A's newest answers are kept, its oldest gave way.
	last := fmt.Sprintf("flood-%d", maxIdempotencyEntries+499)
	call("alice", last)
	if runs["alice/"+last] != 1 {
		t.Errorf("alice's newest key ran %d times", runs["alice/"+last])
	}
}

// TestIdempotencyGlobalBound fills the process bound with many owners: the largest owner gives way first, and the
// cache never holds more than its bound.
func TestIdempotencyGlobalBound(t *testing.T) {
	c := newIdempotencyCache(time.Hour, time.Now)
	c.max, c.perOwner = 10, 6
	done := func() *idemEntry {
		e := &idemEntry{done: make(chan struct{}), status: 200, expires: time.Now().Add(time.Hour)}
		close(e.done)
		return e
	}
	c.addLocked("small", "s", done())
	for i := range 20 {
		c.addLocked(fmt.Sprintf("o%d", i%3), fmt.Sprint(i), done())
	}
	if c.total > c.max {
		t.Errorf("%d entries, bound %d", c.total, c.max)
	}
	if c.owners["small"]["s"] == nil {
		t.Errorf("the smallest owner's entry was evicted")
	}
	n := 0
	for _, es := range c.owners {
		n += len(es)
	}
	if n != c.total {
		t.Errorf("total %d, counted %d", c.total, n)
	}
}
