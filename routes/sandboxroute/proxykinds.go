package sandboxroute

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/sandgate/sandgate/tickets"
)

// ProxyKinds reads the arguments of an edge proxy (the Caddyfile's `sandbox_proxy [<kind>...|port <N>]`): none
// serves every kind, `port <N>` serves apps on that fixed port, otherwise each argument is a kind, named once.
func ProxyKinds(args []string) (kinds []tickets.Kind, port int, err error) {
	switch {
	case len(args) == 0:
		return slices.Clone(tickets.Kinds), 0, nil
	case len(args) == 2 && args[0] == "port":
		p, err := strconv.Atoi(args[1])
		if err != nil || p < 1 || p > 65535 {
			return nil, 0, fmt.Errorf("port %q is not a port number", args[1])
		}
		return []tickets.Kind{tickets.KindApp}, p, nil
	}
	for _, a := range args {
		k, err := tickets.ParseKind(a)
		if err != nil {
			return nil, 0, fmt.Errorf("want sandbox_proxy [<kind>...|port <N>] with kinds app, vnc, terminal, cdp, pty, files, mcp: %v", err)
		}
		if slices.Contains(kinds, k) {
			return nil, 0, fmt.Errorf("sandbox_proxy names kind %s twice", k)
		}
		kinds = append(kinds, k)
	}
	return kinds, 0, nil
}
