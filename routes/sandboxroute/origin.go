package sandboxroute

import (
	"mime"
	"net/http"
	"path"

	"github.com/sandgate/sandgate/tickets"
)

// SandboxCSP is the policy every app response gets in path form. The path form serves every sandbox on the
// gateway's own origin (beside its pages, and the console where the operator opted in with shared_origin), so the
// app's documents run in an opaque origin: scripts, forms, popups and downloads work, but without allow-same-origin
// nothing the app serves can read or call the gateway's origin with the user's cookies. The subdomain form (the
// content origin) needs none of this: it is an origin of its own.
const SandboxCSP = "sandbox allow-scripts allow-forms allow-modals allow-popups allow-popups-to-escape-sandbox " +
	"allow-downloads allow-pointer-lock allow-presentation"

// SetContentHeaders sets, before the proxy copies the sandbox's own headers, what sandbox content gets when it is
// not served from the content origin: every proxied response runs under SandboxCSP, and workspace files are always downloads (never
// rendered on the gateway's origin, whatever their type). filePath is the files route's ?path=, for the name.
// Headers the sandbox sends are added beside these, so they cannot lift the policy (browsers enforce every CSP).
func SetContentHeaders(h http.Header, a Address, filePath string) {
	if a.Subdomain {
		return
	}
	// Every kind: the agent answering a route runs as the sandbox user, so sandbox code can replace it and answer
	// terminal, cdp or mcp requests with a page of its own.
	h.Set("Content-Security-Policy", SandboxCSP)
	switch a.Kind {
	case tickets.KindFiles:
		h.Set("X-Content-Type-Options", "nosniff")
		name := path.Base(filePath)
		if filePath == "" || name == "/" || name == "." {
			h.Set("Content-Disposition", "attachment")
			return
		}
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
}
