package sandboxroute

import (
	"net/http"
	"strconv"

	"github.com/sandgate/sandgate/tickets"
)

// ProxyValues are what the edge's proxy sends the agent besides the request: the agent token, the ticket's
// permission and the route's prefix, as the proxy names them (placeholders it fills per request).
type ProxyValues struct {
	Token, Permission, Prefix string
	// AllowBrowserClose lets CDP clients send Browser.close (filtered by default).
	AllowBrowserClose bool
	// MaxMessage, when positive, is the WebSocket message limit the agent enforces (close 1009).
	MaxMessage int64
}

// ProxyHeaders are the request headers the edge's proxy sets for a route kind: the agent's credential and the
// permission (the client's own X-Sandgate-* headers were removed), and what each kind's agent route needs.
func ProxyHeaders(kind tickets.Kind, v ProxyValues) http.Header {
	set := http.Header{
		// The agent's credential, known only to the gateway.
		GatewayHeaderPrefix + "Token":      []string{v.Token},
		GatewayHeaderPrefix + "Permission": []string{v.Permission},
	}
	switch kind {
	case tickets.KindCDP:
		// Chromium refuses a Host that is not an IP or localhost; the external host travels in X-Forwarded-Host,
		// and the agent writes it, the scheme and the prefix into the /json URLs.
		set.Set("Host", "127.0.0.1")
		set.Set("X-Forwarded-Prefix", v.Prefix)
		if !v.AllowBrowserClose {
			set.Set(GatewayHeaderPrefix+"CDP-Filter", "browser_close")
		}
	case tickets.KindApp, tickets.KindVNC:
		set.Set("X-Forwarded-Prefix", v.Prefix)
	}
	if v.MaxMessage > 0 {
		switch kind {
		case tickets.KindCDP, tickets.KindPTY, tickets.KindTerminal, tickets.KindVNC:
			set.Set(GatewayHeaderPrefix+"WS-Max-Message", strconv.FormatInt(v.MaxMessage, 10))
		}
	}
	return set
}
