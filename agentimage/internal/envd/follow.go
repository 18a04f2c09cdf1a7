package envd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
)

// follow sends a process's events from the given ring offsets: start{pid}, data (stdout, stderr, or pty for a
// terminal), a keepalive after every interval of silence, and end once the process has been reaped and its output
// sent. It returns nil after end (the Connect handler then writes the end-of-stream envelope), or the context's
// error when the client left; the process goes on either way.
func follow(ctx context.Context, p *process.Process, outOff, errOff int64, keepalive time.Duration, send func(*pb.ProcessEvent) error) error {
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(p.PID)}}}); err != nil {
		return err
	}
	streams := []*stream{{ring: p.Stdout(), off: outOff, kind: kindStdout}, {ring: p.Stderr(), off: errOff, kind: kindStderr}}
	if p.PTY {
		streams[0].kind = kindPTY
	}
	ka := time.NewTimer(keepalive)
	defer ka.Stop()
	for {
		sent, finished := false, 0
		var waits [2]<-chan struct{}
		for i, st := range streams {
			data, done, changed := st.next()
			if len(data) > 0 {
				if err := send(st.event(data)); err != nil {
					return err
				}
				sent = true
			}
			if done {
				finished++
			}
			waits[i] = changed
		}
		if finished == len(streams) {
			<-p.Done() // the rings close just before done
			return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: endEvent(p.State())}})
		}
		if sent {
			ka.Reset(keepalive)
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-waits[0]:
		case <-waits[1]:
		case <-ka.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
			ka.Reset(keepalive)
		}
	}
}

type streamKind int

const (
	kindStdout streamKind = iota
	kindStderr
	kindPTY
)

type stream struct {
	ring *ring.Ring
	off  int64
	kind streamKind
}

// next returns the bytes to send now, whether the stream is complete, and what to wait on. A reader that fell
// behind the ring continues at the oldest byte it holds (the bytes in between are gone).
func (s *stream) next() ([]byte, bool, <-chan struct{}) {
	data, eof, changed, err := s.ring.ReadAt(s.off, readChunk)
	var gone *ring.GoneError
	if errors.As(err, &gone) {
		s.off = gone.Oldest
		data, eof, changed, _ = s.ring.ReadAt(s.off, readChunk)
	}
	s.off += int64(len(data))
	return data, eof && len(data) == 0, changed
}

func (s *stream) event(data []byte) *pb.ProcessEvent {
	d := &pb.ProcessEvent_DataEvent{}
	switch s.kind {
	case kindStderr:
		d.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: data}
	case kindPTY:
		d.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: data}
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
