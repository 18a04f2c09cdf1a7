package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoll: WaitOK's and WaitHandshake's loop accepts what its predicate accepts, keeps asking otherwise, and
// reports the last refusal once its context ends.
func TestPoll(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ok := func(r *http.Response) bool { return r.StatusCode == http.StatusOK }
	if err := poll(t.Context(), srv.Client(), srv.URL, ok); err != nil || calls.Load() != 3 {
		t.Fatalf("200 on the third call: %v after %d calls", err, calls.Load())
	}
	never := func(*http.Response) bool { return false }
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := poll(ctx, srv.Client(), srv.URL, never); err == nil || !strings.Contains(err.Error(), "200 OK") {
		t.Fatalf("refused until the end: %v", err)
	}
	srv.Close()
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := poll(ctx, srv.Client(), srv.URL, ok); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("no server: %v", err)
	}
}
