package pages

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandgate/sandgate/tickets"
)

// A page on an app subdomain of the same site as the gateway receives the console's and the pages' SameSite=Strict
// cookies: with them it may neither read the console's API and event stream nor open the terminal's session API.
// The same requests from the gateway's own pages pass.
func TestCookiesRefusedFromSiblingOrigin(t *testing.T) {
	f := newFixture(t, builtAssets())
	console, _ := f.login(t, "key-alice")
	w := f.do(t, httptest.NewRequest("GET", "https://gw.test/sandboxes/"+f.alice+"/terminal/?ticket="+
		f.ticket(t, f.alice, tickets.KindTerminal, tickets.PermWrite), nil))
	session := w.Result().Cookies()[0]
	const sibling = "https://9000-attacker.sandbox.gw.test"
	for _, c := range []struct {
		name, method, path string
		ck                 *http.Cookie
		origin, site       string
		want               int
	}{
		{"console list from a sibling", "GET", "/console/api/sandboxes", console, sibling, "same-site", http.StatusForbidden},
		{"console events from a sibling", "GET", "/console/events", console, "", "same-site", http.StatusForbidden},
		{"console list from a sibling without metadata", "GET", "/console/api/sandboxes", console, sibling, "", http.StatusForbidden},
		{"console list from the console", "GET", "/console/api/sandboxes", console, "", "same-origin", http.StatusOK},
		{"terminal page from a sibling", "GET", "/sandboxes/" + f.alice + "/terminal/", session, "", "same-site", http.StatusForbidden},
		{"terminal session from a sibling", "POST", "/sandboxes/" + f.alice + "/terminal/session", session, sibling, "", http.StatusForbidden},
		{"terminal page reloaded", "GET", "/sandboxes/" + f.alice + "/terminal/", session, "", "none", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Bounded: an admitted event stream would never end (it does on the old code).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, c.method, "https://gw.test"+c.path, strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			r.AddCookie(c.ck)
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.site != "" {
				r.Header.Set("Sec-Fetch-Site", c.site)
			}
			w := f.do(t, r)
			if w.Code != c.want {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, c.want)
			}
			if c.want == http.StatusForbidden && !strings.Contains(w.Body.String(), `"cross_origin"`) {
				t.Fatalf("body %s", w.Body)
			}
		})
	}
}
