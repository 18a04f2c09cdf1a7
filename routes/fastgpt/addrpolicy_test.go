package fastgpt

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/routes/egress"
)

// TestPreviewDialsFollowTheAddressPolicy: the preview client reaches a sandbox on a published loopback port, but a
// zoned, unspecified or link-local spelling of an address (from a sandbox URL or a redirect) is refused at dial
// time, and the listener sees no connection.
func TestPreviewDialsFollowTheAddressPolicy(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	ln, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Skipf("no IPv6: %v", err)
	}
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	lo := "lo"
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback != 0 {
				lo = i.Name
			}
		}
	}
	c := newPreviewClient(5 * time.Second)
	for _, u := range []string{"http://[::1%25" + lo + "]:" + port + "/", "http://[::%25" + lo + "]:" + port + "/",
		"http://[::]:" + port + "/", "http://0.0.0.0:" + port + "/", "http://[fe80::1%25" + lo + "]:" + port + "/"} {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s reached", u)
			continue
		}
		var refused *egress.RefusedError
		var ue *url.Error
		if !errors.As(err, &refused) || !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a refusal", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the listener served %d refused requests", n)
	}
	resp, err := c.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatalf("published loopback port: %v", err)
	}
	resp.Body.Close()
}
