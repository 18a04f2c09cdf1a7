package tickets

import (
	"fmt"
	"net/url"
	"strings"
)

// PathPrefix starts every path-form sandbox route of the edge (routes/sandboxroute).
const PathPrefix = "/sandboxes/"

// Param is the query parameter carrying a ticket.
const Param = "ticket"

// URLs says where a browser (or a CDP client) opens a sandbox's routes with a ticket: the gateway's own origin for
// its pages and streams, the content origin for apps (docs/edge.md, "Origins"). The API's ticket answers and the
// console's open buttons both build their URLs here, so the two never disagree.
type URLs struct {
	// Gateway is the gateway's origin, e.g. https://gw.example.com; empty makes path-only URLs (the console's own
	// same-origin links) for every kind but apps on the content origin.
	Gateway string
	// Content is the content origin's base, e.g. https://sandbox.example.com:8443: the app of sandbox {id} opens at
	// https://{id}.sandbox.example.com:8443/ (the subdomain form, a base domain of sandbox_ticket). Empty serves
	// apps in path form on the gateway's origin.
	Content string
}

// ParseURLs checks both bases: absolute http(s) URLs without a path, query or fragment (a path would be dropped).
func ParseURLs(gateway, content string) (URLs, error) {
	for _, b := range []struct{ name, v string }{{"gateway", gateway}, {"content", content}} {
		if b.v == "" {
			continue
		}
		u, err := url.Parse(b.v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
			strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return URLs{}, fmt.Errorf("%s base URL %q: want scheme://host[:port] with nothing after it", b.name, b.v)
		}
	}
	return URLs{Gateway: strings.TrimRight(gateway, "/"), Content: strings.TrimRight(content, "/")}, nil
}

// Ticket is the URL that spends token on kind's route of sandbox id:
//   - app: https://{id}.{content host}/?ticket=... with a content origin, else {gateway}/sandboxes/{id}/app/?ticket=...
//   - cdp: wss://{gateway host}/sandboxes/{id}/cdp?ticket=..., the one WebSocket Playwright's connectOverCDP opens
//   - others: {gateway}/sandboxes/{id}/{kind}/?ticket=...
//
// Without a gateway origin the URL is a path on the gateway's origin.
func (u URLs) Ticket(id string, kind Kind, token string) string {
	q := "?" + Param + "=" + url.QueryEscape(token)
	if u.OnContentOrigin(kind) {
		scheme, host, _ := strings.Cut(u.Content, "://")
		return scheme + "://" + id + "." + host + "/" + q
	}
	path := PathPrefix + url.PathEscape(id) + "/" + string(kind)
	if kind == KindCDP {
		ws := strings.Replace(strings.Replace(u.Gateway, "https://", "wss://", 1), "http://", "ws://", 1)
		return ws + path + q
	}
	if kind == KindMCP {
		return u.Gateway + path + q // the agent's endpoint is /mcp itself
	}
	return u.Gateway + path + "/" + q
}

// OnContentOrigin reports whether kind opens on the content origin.
func (u URLs) OnContentOrigin(kind Kind) bool {
	return kind == KindApp && u.Content != ""
}
