package sandboxroute

import (
	"testing"

	"github.com/sandgate/sandgate/tickets"
)

// TestProxyHeaders: every kind gets the token and permission; CDP gets a loopback Host, the prefix and the
// Browser.close filter unless allowed; app and vnc get the prefix; the WebSocket kinds get a message limit when set.
func TestProxyHeaders(t *testing.T) {
	v := ProxyValues{Token: "{tok}", Permission: "{perm}", Prefix: "{prefix}", MaxMessage: 1 << 20}
	for _, tc := range []struct {
		kind  tickets.Kind
		allow bool
		want  map[string]string // "" for absent
	}{
		{tickets.KindCDP, false, map[string]string{"Host": "127.0.0.1", "X-Forwarded-Prefix": "{prefix}",
			"X-Sandgate-Cdp-Filter": "browser_close", "X-Sandgate-Ws-Max-Message": "1048576"}},
		{tickets.KindCDP, true, map[string]string{"X-Sandgate-Cdp-Filter": ""}},
		{tickets.KindApp, false, map[string]string{"X-Forwarded-Prefix": "{prefix}", "Host": "", "X-Sandgate-Ws-Max-Message": ""}},
		{tickets.KindVNC, false, map[string]string{"X-Forwarded-Prefix": "{prefix}", "X-Sandgate-Ws-Max-Message": "1048576"}},
		{tickets.KindTerminal, false, map[string]string{"X-Forwarded-Prefix": "", "X-Sandgate-Ws-Max-Message": "1048576"}},
		{tickets.KindFiles, false, map[string]string{"X-Forwarded-Prefix": "", "X-Sandgate-Ws-Max-Message": ""}},
	} {
		v.AllowBrowserClose = tc.allow
		h := ProxyHeaders(tc.kind, v)
		if h.Get("X-Sandgate-Token") != "{tok}" || h.Get("X-Sandgate-Permission") != "{perm}" {
			t.Errorf("%s: credential headers %v", tc.kind, h)
		}
		for name, want := range tc.want {
			if got := h.Get(name); got != want {
				t.Errorf("%s (allow close %v): %s = %q, want %q", tc.kind, tc.allow, name, got, want)
			}
		}
	}
}
