package agentapi

import (
	"net/http"
	"strconv"
)

// HeaderWSMaxMessage lets the gateway cap the size of one client WebSocket message, in bytes, on every agent
// WebSocket route (PTY, CDP, VNC); a larger message closes the connection with 1009.
const HeaderWSMaxMessage = "X-Sandgate-WS-Max-Message"

// WSMaxMessage reads HeaderWSMaxMessage from r; without the header it returns def.
func WSMaxMessage(r *http.Request, def int64) (int64, error) {
	v := r.Header.Get(HeaderWSMaxMessage)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, Errorf(CodeInvalidRequest, "%s %q: want a positive byte count", HeaderWSMaxMessage, v)
	}
	return n, nil
}
