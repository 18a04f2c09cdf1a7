package main_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// ptyConn is a test client of WS /v1/pty/{id}/ws.
type ptyConn struct {
	t         *testing.T
	conn      *websocket.Conn
	out       strings.Builder // live and replayed output
	connected agentapi.PTYControl
	exit      *agentapi.PTYControl
	replayAt  int64 // offset of the first replay frame, -1 if none
}

func dialPTY(t *testing.T, ctx context.Context, c *agentapi.Client, token, id string, since int64, takeover bool, hdr http.Header) (*ptyConn, *http.Response, error) {
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set(agentapi.TokenHeader, token)
	conn, resp, err := websocket.Dial(ctx, c.PTYWebSocketURL(id, since, takeover), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return nil, resp, err
	}
	p := &ptyConn{t: t, conn: conn, replayAt: -1}
	t.Cleanup(func() { conn.CloseNow() })
	typ, data, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("first frame: %v %v", typ, err)
	}
	if err := json.Unmarshal(data, &p.connected); err != nil || p.connected.Type != agentapi.PTYControlConnected {
		t.Fatalf("first frame %s: %v", data, err)
	}
	return p, resp, nil
}

func (p *ptyConn) send(ctx context.Context, s string) {
	p.t.Helper()
	if err := p.conn.Write(ctx, websocket.MessageBinary, append([]byte{agentapi.PTYChannelStdin}, s...)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *ptyConn) control(ctx context.Context, c agentapi.PTYControl) {
	p.t.Helper()
	b, _ := json.Marshal(c)
	if err := p.conn.Write(ctx, websocket.MessageText, b); err != nil {
		p.t.Fatal(err)
	}
}

// readUntil reads frames until the accumulated output contains want (or an exit frame arrives when want is "").
func (p *ptyConn) readUntil(ctx context.Context, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		if want != "" && strings.Contains(p.out.String(), want) {
			return nil
		}
		typ, data, err := p.conn.Read(ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageBinary && len(data) > 0 {
			switch data[0] {
			case agentapi.PTYChannelStdout:
				p.out.Write(data[1:])
			case agentapi.PTYChannelReplay:
				if p.replayAt < 0 {
					p.replayAt = int64(binary.BigEndian.Uint64(data[1:9]))
				}
				p.out.Write(data[9:])
			}
			continue
		}
		var c agentapi.PTYControl
		_ = json.Unmarshal(data, &c)
		if c.Type == agentapi.PTYControlExit {
			p.exit = &c
			if want == "" {
				return nil
			}
		}
	}
}

// waitReleased waits until no client holds the session: the agent releases a hold when the handler of a closed
// connection returns, which can be a moment after the client's close, so a reconnect right away may still get 409.
func waitReleased(t *testing.T, ctx context.Context, c *agentapi.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(testenv.WaitLimit)
	for {
		sessions, err := c.PTYSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := false
		for _, s := range sessions {
			held = held || (s.ID == id && s.Attached)
		}
		if !held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still held after %s", id, testenv.WaitLimit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPTY drives PTY sessions over real WebSockets.
func TestPTY(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell"}})
	c := clientFor(sb)
	ctx := testCtx(t)

	sess, err := c.CreatePTY(ctx, agentapi.PTYCreateRequest{Cols: 100, Rows: 30, IdleTTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("input, stty size and resize", func(t *testing.T) {
		p, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.send(ctx, "stty size\r")
		if err := p.readUntil(ctx, "30 100"); err != nil {
			t.Fatalf("%v; output %q", err, p.out.String())
		}
		p.control(ctx, agentapi.PTYControl{Type: agentapi.PTYControlResize, Cols: 120, Rows: 40})
		p.send(ctx, "stty size\r")
		if err := p.readUntil(ctx, "40 120"); err != nil {
			t.Fatalf("%v; output %q", err, p.out.String())
		}
		// a signal reaches the terminal's foreground job, not just the shell
		p.send(ctx, "sleep 100\r")
		// Signal once the job runs (a signal before the fork would reach the shell and leave sleep blocking the echo).
		for exec.Command("docker", "exec", sb.Name, "pgrep", "-x", "sleep").Run() != nil {
			if ctx.Err() != nil {
				t.Fatal("sleep 100 never started")
			}
			time.Sleep(100 * time.Millisecond)
		}
		p.control(ctx, agentapi.PTYControl{Type: agentapi.PTYControlSignal, Signal: "INT"})
		p.send(ctx, "echo after-$((1+1))-int\r")
		if err := p.readUntil(ctx, "after-2-int"); err != nil {
			t.Fatalf("%v; output %q", err, p.out.String())
		}
		p.control(ctx, agentapi.PTYControl{Type: agentapi.PTYControlPing})
		p.send(ctx, "echo marker-$((6*7))\r")
		if err := p.readUntil(ctx, "marker-42"); err != nil {
			t.Fatal(err)
		}
		p.conn.Close(websocket.StatusNormalClosure, "bye")
	})

	t.Run("session survives disconnect and replays from an offset", func(t *testing.T) {
		waitReleased(t, ctx, c, sess.ID)
		info, err := c.PTYSessions(ctx)
		if err != nil || len(info) != 1 || info[0].Attached || info[0].Status != agentapi.StatusRunning {
			t.Fatalf("sessions: %+v %v", info, err)
		}
		p, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, 0, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The connected frame gives the session's offset when it attached. The shell may still be writing its
		// prompt after marker-42 (a busy machine delays it), so the offset is bounded by the ones read before and
		// after the attach rather than equal to the first.
		after, err := c.PTYSessions(ctx)
		if err != nil || len(after) != 1 {
			t.Fatalf("sessions after attaching: %+v %v", after, err)
		}
		if p.connected.Offset < info[0].Offset || p.connected.Offset > after[0].Offset {
			t.Fatalf("connected at %d, session offset %d before attaching and %d after", p.connected.Offset, info[0].Offset, after[0].Offset)
		}
		if err := p.readUntil(ctx, "marker-42"); err != nil || p.replayAt != 0 {
			t.Fatalf("replay: %v at %d; %q", err, p.replayAt, p.out.String())
		}
		// a later offset replays only what follows it
		p.conn.Close(websocket.StatusNormalClosure, "")
		waitReleased(t, ctx, c, sess.ID)
		from := p.connected.Offset - 10
		p2, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, from, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		p2.send(ctx, "echo again\r")
		if err := p2.readUntil(ctx, "again"); err != nil || p2.replayAt != from {
			t.Fatalf("%v, replay at %d want %d", err, p2.replayAt, from)
		}
		p2.conn.Close(websocket.StatusNormalClosure, "")
	})

	t.Run("second client gets 409, takeover closes the first with 4001", func(t *testing.T) {
		waitReleased(t, ctx, c, sess.ID)
		first, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, resp, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, false, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
			t.Fatalf("want 409, got %v %v", resp, err)
		}
		second, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = first.readUntil(ctx, "never printed")
		if websocket.CloseStatus(err) != agentapi.PTYCloseTakenOver {
			t.Fatalf("first client: want close 4001, got %v", err)
		}
		second.send(ctx, "echo still-here\r")
		if err := second.readUntil(ctx, "still-here"); err != nil {
			t.Fatal(err)
		}
		second.conn.Close(websocket.StatusNormalClosure, "")
	})

	t.Run("message size limit from the gateway header", func(t *testing.T) {
		waitReleased(t, ctx, c, sess.ID)
		p, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, false, http.Header{agentapi.HeaderWSMaxMessage: {"64"}})
		if err != nil {
			t.Fatal(err)
		}
		p.send(ctx, strings.Repeat("x", 200))
		err = p.readUntil(ctx, "never printed")
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("want close 1009, got %v", err)
		}
	})

	t.Run("exit is reported and the session can be deleted", func(t *testing.T) {
		waitReleased(t, ctx, c, sess.ID)
		p, _, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.send(ctx, "exit 5\r")
		err = p.readUntil(ctx, "")
		if err != nil || p.exit == nil || p.exit.ExitCode == nil || *p.exit.ExitCode != 5 {
			t.Fatalf("exit frame %+v, %v", p.exit, err)
		}
		if err := c.DeletePTY(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		_, resp, err := dialPTY(t, ctx, c, sb.Token, sess.ID, -1, false, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("deleted session: %v %v", resp, err)
		}
	})

	t.Run("idle TTL ends an unattended session", func(t *testing.T) {
		s, err := c.CreatePTY(ctx, agentapi.PTYCreateRequest{Cmd: "sleep 600", IdleTTLSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(testenv.WaitLimit)
		for {
			list, err := c.PTYSessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s still there: %+v", s.ID, list)
			}
			time.Sleep(200 * time.Millisecond)
		}
		var e *agentapi.Error
		if err := c.DeletePTY(ctx, s.ID); !errors.As(err, &e) || e.Code != agentapi.CodeNotFound {
			t.Fatalf("want not_found, got %v", err)
		}
	})
}
