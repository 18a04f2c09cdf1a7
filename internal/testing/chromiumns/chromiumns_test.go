package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestBrowserRequestsSurviveNetworkChanges performs what the Docker engine does to a browser test: while Chromium
// waits for a page, an interface appears on the machine, takes an address and goes away, three times. Through
// chromiumns the page arrives. Launched straight from /usr/bin/chromium, as the browser tests were, the same
// navigation fails with net::ERR_NETWORK_CHANGED: the test performs the failure it guards against.
func TestBrowserRequestsSurviveNetworkChanges(t *testing.T) {
	testenv.Integration(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to change the machine's network")
	}
	var served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		for i := range 3 {
			churn(t, fmt.Sprintf("sgcn%d%d%s", n, i, testenv.Unique("")[1:5]), int(n)*10+i)
		}
		// A browser that drops the request ends its stream: that is observable, and waited for. A browser that
		// keeps it shows nothing, so the page is answered once a drop, which comes within milliseconds of the
		// change on an idle machine, has had dropWindow to show; a busy machine can only make that pass wrongly,
		// never fail wrongly, and the drop test (?drop) waits for as long as it takes.
		window := dropWindow
		if r.URL.Query().Has("drop") {
			window = 100 * time.Second
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(window):
		}
		fmt.Fprint(w, "arrived")
	}))
	// HTTP/2, as the gateway serves: Chromium ends its HTTP/2 sessions, and every stream on them, when it sees the
	// network change.
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // Chromium's first handshake refuses the test's certificate
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := "https://app.localhost:" + fmt.Sprint(srv.Listener.Addr().(*net.TCPAddr).Port) + "/"

	if r := openPage(t, url); r.Text != "arrived" {
		t.Errorf("through chromiumns: %+v, want the page", r)
	}
	if r := openPage(t, url+"?drop", "SANDGATE_CHROMIUM=/usr/bin/chromium"); !strings.Contains(r.Error, "ERR_NETWORK_CHANGED") {
		t.Errorf("Chromium in the machine's namespace: %+v, want net::ERR_NETWORK_CHANGED (else this test no longer changes what Chromium watches)", r)
	}
}

// dropWindow is how long a page through chromiumns is held after the network changed, for a drop to show.
const dropWindow = 3 * time.Second

type pageResult struct {
	Text  string `json:"text"`
	Error string `json:"error"`
}

func openPage(t *testing.T, url string, env ...string) pageResult {
	t.Helper()
	out, err := testenv.RunNode(t, filepath.Join("testdata", "network_change.cjs"), append([]string{"URL=" + url}, env...)...)
	_, res, ok := strings.Cut(out, "RESULT ")
	if err != nil || !ok {
		t.Fatalf("network_change.cjs: %v\n%s", err, out)
	}
	var r pageResult
	res, _, _ = strings.Cut(res, "\n")
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("result %q: %v", res, err)
	}
	return r
}

// churn adds a veth pair, its end named name with an address of its own, switches that end on and removes the
// pair: the netlink events a container's veth and bridge make.
func churn(t *testing.T, name string, octet int) {
	for _, args := range [][]string{
		{"link", "add", name, "type", "veth", "peer", "name", name + "p"},
		{"addr", "add", fmt.Sprintf("198.18.%d.1/32", octet%250), "dev", name},
		{"link", "set", name, "up"},
		{"link", "delete", name},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = exec.Command("ip", "link", "delete", name).Run()
			t.Errorf("ip %v: %v %s", args, err, out)
			return
		}
	}
}
