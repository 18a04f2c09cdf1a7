package envd

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

// follow sends a process's events from the given ring offsets: start{pid}, data (stdout, stderr, or pty for a
// terminal), a keepalive after every interval of silence, and end once the process has been reaped and its output
// sent. It returns nil after end (the Connect handler then writes the end-of-stream envelope), or the context's
// error when the client left; the process goes on either way. The following itself is the agent's one follower,
// process.FollowOutput.
func follow(ctx context.Context, p *process.Process, outOff, errOff int64, keepalive time.Duration, send func(*pb.ProcessEvent) error) error {
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(p.PID)}}}); err != nil {
		return err
	}
	err := p.FollowOutput(ctx, outOff, errOff, process.FollowOptions{Keepalive: keepalive, MaxChunk: readChunk}, process.Sink{
		Data: func(stream string, data []byte, _ int64) error {
			return send(dataEvent(stream, data, p.PTY))
		},
		Keepalive: func() error {
			return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}})
		},
	})
	if err != nil {
		return err
	}
	return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: endEvent(p.State())}})
}

// dataEvent is a data event: a terminal's output is pty, else stdout or stderr.
func dataEvent(stream string, data []byte, pty bool) *pb.ProcessEvent {
	d := &pb.ProcessEvent_DataEvent{}
	switch {
	case pty && stream == agentapi.StreamStdout:
		d.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: data}
	case stream == agentapi.StreamStderr:
		d.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: data}
	default:
		d.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: data}
	}
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: d}}
}

// endEvent is envd's end event: an exit gives its code with exited true and status "exit status N" (also the
// error when N is not 0, which E2B's SDK shows in CommandExitError); a signal gives exit code -1, exited false and
// status "signal: killed", as Go's os/exec (envd's) words it.
func endEvent(st process.State) *pb.ProcessEvent_EndEvent {
	if st.Signal != "" {
		status := "signal: " + signalWords(st.Signal)
		return &pb.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: status, Error: &status}
	}
	code := -1
	if st.ExitCode != nil {
		code = *st.ExitCode
	}
	status := "exit status " + strconv.Itoa(code)
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: status}
	if code != 0 {
		end.Error = &status
	}
	return end
}

// signalWords is a signal's description as Go's os.ProcessState prints it ("killed", "terminated").
func signalWords(name string) string {
	if sig, err := process.ParseSignal(name); err == nil {
		return sig.String()
	}
	return strings.ToLower(strings.TrimPrefix(name, "SIG"))
}
