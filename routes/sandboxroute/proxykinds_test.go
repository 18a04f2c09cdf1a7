package sandboxroute

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/tickets"
)

func TestProxyKinds(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		kinds []tickets.Kind
		port  int
		err   string
	}{
		{args: nil, kinds: tickets.Kinds},
		{args: []string{"port", "8080"}, kinds: []tickets.Kind{tickets.KindApp}, port: 8080},
		{args: []string{"terminal", "cdp"}, kinds: []tickets.Kind{tickets.KindTerminal, tickets.KindCDP}},
		{args: []string{"shell"}, err: "want sandbox_proxy"},
		{args: []string{"port", "0"}, err: "not a port number"},
		{args: []string{"port", "65536"}, err: "not a port number"},
		{args: []string{"port", "x"}, err: "not a port number"},
		{args: []string{"app", "extra"}, err: "want sandbox_proxy"},
		{args: []string{"app", "app"}, err: "twice"},
		{args: []string{"terminal", "port", "3000"}, err: "want sandbox_proxy"},
	} {
		kinds, port, err := ProxyKinds(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(kinds, tc.kinds) || port != tc.port {
			t.Errorf("%q = %v %d %v, want %v %d", tc.args, kinds, port, err, tc.kinds, tc.port)
		}
	}
}
