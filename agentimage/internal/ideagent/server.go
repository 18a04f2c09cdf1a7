package ideagent

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
)

const (
	resizeFrameLen   = 13
	resizeFrameMagic = 0xFE
	ptyChunk         = 4096
)

// serveWS is the handshake of port 1318: path /fs or /terminal, ?token= equal to the password, ?permission=
// read (default) or write, and write for a terminal. Refusals are 401 "Unauthorized: <reason>".
func (a *Agent) serveWS(w http.ResponseWriter, r *http.Request) {
	channel := r.URL.Path
	if channel != "/fs" && channel != "/terminal" {
		unauthorized(w, "unknown channel")
		return
	}
	q := r.URL.Query()
	token := q.Get("token")
	if token == "" {
		unauthorized(w, "missing token")
		return
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(a.password)) != 1 {
		unauthorized(w, "invalid token")
		return
	}
	writable := false
	switch q.Get("permission") {
	case "", "read":
	case "write":
		writable = true
	default:
		unauthorized(w, "invalid permission")
		return
	}
	if channel == "/terminal" && !writable {
		unauthorized(w, "terminal requires write permission")
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	conn.SetReadLimit(a.cfg.MaxMessageBytes)
	defer conn.CloseNow()
	ctx := context.Background()
	if channel == "/fs" {
		(&fsSession{a: a, conn: conn, writable: writable}).serve(ctx)
		_ = conn.Close(websocket.StatusNormalClosure, "")
		return
	}
	a.serveTerminal(ctx, conn)
}

func unauthorized(w http.ResponseWriter, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("Unauthorized: " + reason))
}

// serveTerminal runs the shell on a PTY (24x80, cwd the workspace): output goes out as binary frames of at most
// 4096 bytes; a 13-byte binary frame starting 0xFE resizes; every other frame is input.
func (a *Agent) serveTerminal(ctx context.Context, conn *websocket.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.Command(a.cfg.Shell)
	cmd.Dir = a.cfg.Workspace
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		a.cfg.Logger.Warn("IDE agent: starting terminal failed", "shell", a.cfg.Shell, "error", err.Error())
		_ = conn.Close(websocket.StatusInternalError, "failed to start terminal")
		return
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	defer func() {
		// The shell leads its own session: hang up the whole group, then make sure.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP)
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		f.Close()
	}()

	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		buf := make([]byte, ptyChunk)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					cancel()
					return
				}
			}
			if err != nil {
				return // EIO once the shell and its children are gone
			}
		}
	}()
	go func() {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				cancel()
				return
			}
			if len(data) == resizeFrameLen && data[0] == resizeFrameMagic {
				cols := binary.BigEndian.Uint32(data[1:5])
				rows := binary.BigEndian.Uint32(data[5:9])
				if cols > 0 && rows > 0 && cols <= 0xFFFF && rows <= 0xFFFF {
					_ = pty.Setsize(f, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
				}
				continue
			}
			if _, err := f.Write(data); err != nil && !errors.Is(err, os.ErrClosed) {
				cancel()
				return
			}
		}
	}()
	select {
	case <-ctx.Done():
		_ = conn.Close(websocket.StatusNormalClosure, "")
	case <-exited:
		select {
		case <-outDone:
		case <-time.After(time.Second):
		}
		_ = conn.Close(websocket.StatusNormalClosure, "terminal exited")
	}
}
