package pages

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandgate/sandgate/routes/sandboxroute"
	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// deleteFails is the real Manager whose Delete fails with err: the one way to make every code of the core's
// table reach the console (a real delete fails only as the engine does, with engine_error).
type deleteFails struct {
	*sandboxes.Manager
	err error
}

func (d *deleteFails) Delete(context.Context, string) error { return d.err }

// serve makes the console's service run over d, d over the fixture's Manager.
func (d *deleteFails) serve(c *Config, m *sandboxes.Manager) {
	d.Manager = m
	c.Service = service.New(service.Config{Sandboxes: d})
}

// TestConsoleAnswersEveryCoreCode makes the console's delete fail with each core error code in turn and checks the
// answer: the edge's status for it (the edge's own test pins those), the code and the message in its envelope.
func TestConsoleAnswersEveryCoreCode(t *testing.T) {
	fails := &deleteFails{}
	f := newFixtureWith(t, nil, fails.serve)
	ck, csrf := f.login(t, "key-alice")
	for _, code := range sandboxes.ErrorCodes() {
		t.Run(code, func(t *testing.T) {
			want, ok := sandboxroute.StatusOf(code)
			if !ok {
				t.Fatalf("core code %q has no status", code)
			}
			fails.err = &sandboxes.Error{Code: code, Message: "refused: " + code}
			r := httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/"+f.alice, nil)
			r.AddCookie(ck)
			r.Header.Set(CSRFHeader, csrf)
			w := f.do(t, r)
			var body sandboxroute.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body.String(), err)
			}
			if w.Code != want || body.Error.Code != code || body.Error.Message != "refused: "+code {
				t.Fatalf("delete failing with %s answered %d %s, want %d", code, w.Code, w.Body.String(), want)
			}
		})
	}
	// A failure that is not the lifecycle's: the sandbox could not be reached.
	fails.err = errors.New("engine unreachable")
	r := httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/"+f.alice, nil)
	r.AddCookie(ck)
	r.Header.Set(CSRFHeader, csrf)
	if w := f.do(t, r); w.Code != http.StatusBadGateway {
		t.Fatalf("untyped failure: %d %s", w.Code, w.Body.String())
	}
}

// TestConsoleAnswersEveryServiceCode: the service's checks answer the console's delete with their own codes; those
// that are the core's get the edge's status for them, the service's own (a failure of the sandbox's runtime, a
// refused path) are a failure to reach the sandbox, 502. Every code of service.ErrorCodes is walked.
func TestConsoleAnswersEveryServiceCode(t *testing.T) {
	fails := &deleteFails{}
	f := newFixtureWith(t, nil, fails.serve)
	ck, csrf := f.login(t, "key-alice")
	for _, code := range service.ErrorCodes() {
		t.Run(code, func(t *testing.T) {
			want, ok := sandboxroute.StatusOf(code)
			if !ok {
				want = http.StatusBadGateway
			}
			fails.err = service.Errorf(code, "refused: %s", code)
			r := httptest.NewRequest("DELETE", "https://gw.test/console/api/sandboxes/"+f.alice, nil)
			r.AddCookie(ck)
			r.Header.Set(CSRFHeader, csrf)
			if w := f.do(t, r); w.Code != want {
				t.Fatalf("delete failing with service code %s answered %d %s, want %d", code, w.Code, w.Body.String(), want)
			}
		})
	}
}
