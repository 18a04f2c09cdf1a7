package testenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/coder/websocket"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// PTYRun sends a command on a terminal WebSocket (the agent's PTY channels) and waits, within ctx, for marker in
// its output. Output can arrive on either channel: the agent starts its live stream at the end of what the terminal
// had printed when the socket attached and sends what came before as replay (PTYChannelReplay, an 8-byte offset
// first), so a command that runs between the attach and that moment answers in the replay.
func PTYRun(ctx context.Context, c *websocket.Conn, cmd, marker string) error {
	if err := c.Write(ctx, websocket.MessageBinary, append([]byte{agentapi.PTYChannelStdin}, cmd+"\n"...)); err != nil {
		return fmt.Errorf("writing %q to the terminal: %w", cmd, err)
	}
	var out strings.Builder
	for !strings.Contains(out.String(), marker) {
		typ, p, err := c.Read(ctx)
		if err != nil {
			return fmt.Errorf("reading the terminal (output so far %q): %w", out.String(), err)
		}
		switch {
		case typ != websocket.MessageBinary || len(p) == 0:
		case p[0] == agentapi.PTYChannelStdout:
			out.Write(p[1:])
		case p[0] == agentapi.PTYChannelReplay && len(p) >= 9:
			out.Write(p[9:])
		}
	}
	return nil
}
