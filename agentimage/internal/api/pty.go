package api

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/pty"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
)

// defaultWSMaxMessage caps a client's WebSocket message unless the gateway sets HeaderWSMaxMessage.
const defaultWSMaxMessage = 1 << 20

// ptyFrameData is the most output one frame carries.
const ptyFrameData = 32 << 10

func (a *API) createPTY(w http.ResponseWriter, r *http.Request) {
	var req agentapi.PTYCreateRequest
	if err := decode(w, r, &req); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	if req.IdleTTLSeconds < 0 {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "idle_ttl_s must not be negative"))
		return
	}
	dir, err := a.resolveDir(req.Cwd)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	s, err := a.PTYs.Create(pty.Spec{Cmd: req.Cmd, Argv: req.Argv, Dir: dir, Env: req.Env, Cols: req.Cols, Rows: req.Rows,
		IdleTTL: time.Duration(req.IdleTTLSeconds) * time.Second})
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusCreated, s.Info())
}

func (a *API) listPTY(w http.ResponseWriter, _ *http.Request) {
	list := agentapi.PTYList{Sessions: []agentapi.PTYSession{}}
	for _, s := range a.PTYs.List() {
		list.Sessions = append(list.Sessions, s.Info())
	}
	agentapi.WriteJSON(w, http.StatusOK, list)
}

func (a *API) getPTY(w http.ResponseWriter, r *http.Request) {
	s, err := a.PTYs.Get(r.PathValue("id"))
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, s.Info())
}

func (a *API) deletePTY(w http.ResponseWriter, r *http.Request) {
	reply(w, agentapi.OK{OK: true}, a.PTYs.Delete(r.PathValue("id")))
}

// ptyWebSocket attaches a client to a session: replay from ?since= (default: everything still buffered), live
// output, input, resize and signals. Refusals (unknown session, held by another client, bad parameters) are
// answered as HTTP errors before the upgrade.
func (a *API) ptyWebSocket(w http.ResponseWriter, r *http.Request) {
	s, err := a.PTYs.Get(r.PathValue("id"))
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	q := r.URL.Query()
	since := int64(-1)
	if v := q.Get(agentapi.QuerySince); v != "" {
		if since, err = strconv.ParseInt(v, 10, 64); err != nil || since < 0 {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "since %q: want a byte offset", v))
			return
		}
	}
	maxMsg := int64(defaultWSMaxMessage)
	if v := r.Header.Get(agentapi.HeaderWSMaxMessage); v != "" {
		if maxMsg, err = strconv.ParseInt(v, 10, 64); err != nil || maxMsg <= 0 {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "%s %q: want a positive byte count", agentapi.HeaderWSMaxMessage, v))
			return
		}
	}
	takeover := q.Get(agentapi.QueryTakeover) == "1" || q.Get(agentapi.QueryTakeover) == "true"
	holder, err := s.Attach(takeover)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	defer s.Detach(holder)
	// Origin is not checked: authentication is the bearer token or a one-time ticket, never an ambient cookie, so
	// a cross-site page cannot open this socket on a user's behalf.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered the client
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxMsg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer cancel()
		a.ptyOutput(ctx, conn, s, holder, since)
	}()
	a.ptyInput(ctx, conn, s)
}

// ptyInput reads client frames until the connection ends.
func (a *API) ptyInput(ctx context.Context, conn *websocket.Conn, s *pty.Session) {
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if len(data) == 0 {
				continue
			}
			if data[0] != agentapi.PTYChannelStdin {
				sendControl(ctx, conn, agentapi.PTYControl{Type: agentapi.PTYControlError, Code: agentapi.CodeInvalidRequest,
					Message: "binary frames from the client must start with channel 0x00 (stdin)"})
				continue
			}
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err := s.Proc.WriteStdin(wctx, data[1:], false)
			wcancel()
			if err != nil {
				sendError(ctx, conn, err)
			}
			continue
		}
		var c agentapi.PTYControl
		if err := json.Unmarshal(data, &c); err != nil {
			sendError(ctx, conn, agentapi.Errorf(agentapi.CodeInvalidRequest, "control frame: %v", err))
			continue
		}
		switch c.Type {
		case agentapi.PTYControlResize:
			if err := s.Resize(c.Cols, c.Rows); err != nil {
				sendError(ctx, conn, err)
			}
		case agentapi.PTYControlSignal:
			sig, err := process.ParseSignal(c.Signal)
			if err == nil {
				err = s.Proc.Signal(sig)
			}
			if err != nil {
				sendError(ctx, conn, err)
			}
		case agentapi.PTYControlPing:
			sendControl(ctx, conn, agentapi.PTYControl{Type: agentapi.PTYControlPong})
		default:
			sendError(ctx, conn, agentapi.Errorf(agentapi.CodeInvalidRequest, "unknown control frame type %q", c.Type))
		}
	}
}

// ptyOutput sends connected, the replay, then live output until the session ends, the client is kicked or leaves.
func (a *API) ptyOutput(ctx context.Context, conn *websocket.Conn, s *pty.Session, holder *pty.Holder, since int64) {
	out := s.Proc.Stdout()
	oldest, end, _ := out.Bounds()
	from := since
	if from < 0 {
		from = oldest
	}
	if from > end {
		from = end
	}
	if err := sendControl(ctx, conn, agentapi.PTYControl{Type: agentapi.PTYControlConnected, Offset: end}); err != nil {
		return
	}
	if from < oldest {
		sendControl(ctx, conn, agentapi.PTYControl{Type: agentapi.PTYControlError, Code: agentapi.CodeReplayGone, Offset: oldest,
			Message: "output before offset " + strconv.FormatInt(oldest, 10) + " has left the replay buffer"})
		from = oldest
	}
	for from < end {
		data, _, _, err := out.ReadAt(from, int(min(ptyFrameData, end-from)))
		if err != nil || len(data) == 0 {
			break
		}
		frame := make([]byte, 9+len(data))
		frame[0] = agentapi.PTYChannelReplay
		binary.BigEndian.PutUint64(frame[1:9], uint64(from))
		copy(frame[9:], data)
		if conn.Write(ctx, websocket.MessageBinary, frame) != nil {
			return
		}
		from += int64(len(data))
	}
	ping := time.NewTicker(a.WSPing)
	defer ping.Stop()
	off := end
	for {
		data, eof, changed, err := out.ReadAt(off, ptyFrameData)
		var gone *ring.GoneError
		if errors.As(err, &gone) { // this client is slower than the terminal: skip what was overwritten
			off = gone.Oldest
			continue
		}
		if len(data) > 0 {
			if conn.Write(ctx, websocket.MessageBinary, append([]byte{agentapi.PTYChannelStdout}, data...)) != nil {
				return
			}
			off += int64(len(data))
			continue
		}
		if eof {
			<-s.Proc.Done()
			st := s.Proc.State()
			sendControl(ctx, conn, agentapi.PTYControl{Type: agentapi.PTYControlExit, ExitCode: st.ExitCode, Signal: st.Signal})
			conn.Close(agentapi.PTYCloseExited, "process exited")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-holder.Kicked():
			conn.Close(agentapi.PTYCloseTakenOver, "taken over by another client")
			return
		case <-changed:
		case <-ping.C:
			pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil {
				conn.CloseNow()
				return
			}
		}
	}
}

func sendControl(ctx context.Context, conn *websocket.Conn, c agentapi.PTYControl) error {
	b, _ := json.Marshal(c) // plain struct: cannot fail
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return conn.Write(wctx, websocket.MessageText, b)
}

func sendError(ctx context.Context, conn *websocket.Conn, err error) {
	var e *agentapi.Error
	if !errors.As(err, &e) {
		e = &agentapi.Error{Code: agentapi.CodeInternal, Message: err.Error()}
	}
	sendControl(ctx, conn, agentapi.PTYControl{Type: agentapi.PTYControlError, Code: e.Code, Message: e.Message})
}
