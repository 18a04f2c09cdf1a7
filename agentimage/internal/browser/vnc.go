package browser

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// serveVNC bridges a noVNC WebSocket (binary frames, subprotocol "binary") to the VNC server's TCP port, so no
// websockify process is needed.
func (b *Browser) serveVNC(w http.ResponseWriter, r *http.Request) {
	if !b.vncEnabled() {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotSupported, "this sandbox has no VNC server (capability %q or %q not set)", "vnc", "browser"))
		return
	}
	if !isWebSocket(r) {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "this is a WebSocket endpoint (noVNC connects here)"))
		return
	}
	limit, err := maxMessage(r)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	addr := "127.0.0.1:" + strconv.Itoa(b.cfg.VNCPort)
	tcp, err := dialRetry(r.Context(), addr, readyWait)
	if err != nil {
		e := agentapi.Errorf(agentapi.CodeUnavailable, "the VNC server is not answering (starting or restarting): %v", err)
		e.Retryable = true
		agentapi.WriteError(w, e)
		return
	}
	defer tcp.Close()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{"binary"},
		InsecureSkipVerify: true, // authenticated by token; noVNC pages are served from the gateway's origin
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return
	}
	c.SetReadLimit(limit)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ws := websocket.NetConn(ctx, c, websocket.MessageBinary)
	errc := make(chan error, 3)
	go func() { _, err := io.Copy(ws, tcp); errc <- err }()
	var toServer io.Writer = tcp
	if viewOnly(r) {
		toServer = newViewOnlyRFB(tcp)
	}
	go func() { _, err := io.Copy(toServer, ws); errc <- err }()
	go func() { errc <- pingBoth(ctx, c) }()
	err = <-errc
	code, reason := closeCodeFor(err)
	var refused *errRFBViewOnly
	if errors.As(err, &refused) {
		b.cfg.Logger.Warn("view-only VNC stream refused", "error", refused.Error())
		code, reason = websocket.StatusPolicyViolation, truncate(refused.Error(), 100)
	}
	if err == nil { // the VNC server closed the stream
		code, reason = websocket.StatusNormalClosure, ""
	}
	_ = c.Close(code, reason)
}

// viewOnly reports whether the gateway granted the caller only read permission (X-Sandgate-Permission, a header
// the edge strips from clients): then the bridge carries pixels but drops keyboard, pointer and clipboard input.
func viewOnly(r *http.Request) bool {
	return r.Header.Get("X-Sandgate-Permission") == "read"
}

// dialRetry dials addr until it answers or wait passes (the server may be restarting).
func dialRetry(ctx context.Context, addr string, wait time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return nil, err
		}
	}
}
