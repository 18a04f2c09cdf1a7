package sandboxroute

import (
	"bufio"
	"net"
	"net/http"
	"slices"
)

// StrippedAnswerHeaders are the response headers a sandbox may not send on a shared origin (the gateway's, where
// the console's cookie lives, and OpenSandbox's proxy port, which every owner's sandboxes share). Each changes
// state of the origin rather than of the one response:
//   - Set-Cookie (and the obsolete Set-Cookie2): plant a console or session cookie (login CSRF), overwrite or
//     expire the operator's (a log-out), or toss cookies at other sandboxes' paths;
//   - Service-Worker-Allowed: widen a service worker's scope beyond its script's directory, to the whole origin,
//     where it would see every other route's URLs (tickets, proxy keys) and answer them;
//   - Clear-Site-Data: wipe the origin's cookies and storage (a log-out of every session on it).
//
// The subdomain form's origins are the sandbox's own and keep them.
var StrippedAnswerHeaders = []string{"Set-Cookie", "Set-Cookie2", "Service-Worker-Allowed", "Clear-Site-Data"}

// GuardAnswer wraps w for a proxy to the sandbox at a so that, in path form, the headers in StrippedAnswerHeaders
// the sandbox sends never reach the client. Set-Cookie values already on w when it is wrapped (the gate's session
// cookie) are the gateway's own and are kept. The filter runs when the header is written, so it holds for every
// answer the proxy copies: a WebSocket's 101 (which Caddy's reverse_proxy copies without its response header ops),
// 1xx interim answers, and a body written without an explicit status.
func GuardAnswer(w http.ResponseWriter, a Address) http.ResponseWriter {
	if a.Subdomain {
		return w
	}
	return &answerGuard{ResponseWriter: w, own: slices.Clone(w.Header().Values("Set-Cookie"))}
}

type answerGuard struct {
	http.ResponseWriter
	own   []string
	wrote bool // a final (non-1xx) header went out; later changes to the map cannot reach the client
}

// StripAnswerHeaders removes StrippedAnswerHeaders from h, a sandbox's answer (for proxies that can edit the
// answer before copying it, as net/http/httputil's ModifyResponse can).
func StripAnswerHeaders(h http.Header) {
	for _, name := range StrippedAnswerHeaders {
		h.Del(name)
	}
}

func (g *answerGuard) filter() {
	h := g.ResponseWriter.Header()
	StripAnswerHeaders(h)
	if len(g.own) > 0 {
		h["Set-Cookie"] = slices.Clone(g.own)
	}
}

func (g *answerGuard) WriteHeader(code int) {
	if !g.wrote {
		g.filter()
		g.wrote = code >= 200 || code == http.StatusSwitchingProtocols
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *answerGuard) Write(b []byte) (int, error) {
	if !g.wrote {
		g.filter()
		g.wrote = true
	}
	return g.ResponseWriter.Write(b)
}

// FlushError flushes through whatever w wraps; a flush before any status writes the header, so it filters first.
func (g *answerGuard) FlushError() error {
	if !g.wrote {
		g.filter()
		g.wrote = true
	}
	return http.NewResponseController(g.ResponseWriter).Flush()
}

// Flush is FlushError for callers that assert http.Flusher.
func (g *answerGuard) Flush() { _ = g.FlushError() }

// Hijack filters before handing over the connection: a proxy may write the upgrade's header itself from this
// header map after hijacking (net/http/httputil's ReverseProxy does) rather than through WriteHeader.
func (g *answerGuard) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if !g.wrote {
		g.filter()
		g.wrote = true
	}
	return http.NewResponseController(g.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach what w wraps (deadlines, full-duplex).
func (g *answerGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }
