package process

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
)

// maxChunk is the most output one event carries.
const maxChunk = 32 << 10

// Event is one event of a process's stream, ready for SSE: Name, ID (a cursor) and Data (JSON-encodable).
type Event struct {
	Name string
	ID   string
	Data any
}

// CheckCursor reports replay_gone when c asks for bytes the rings no longer hold, and invalid_request when it
// points past what was written.
func (p *Process) CheckCursor(c agentapi.Cursor) error {
	oOld, oEnd, _ := p.stdout.Bounds()
	eOld, eEnd, _ := p.stderr.Bounds()
	if c.Stdout > oEnd || c.Stderr > eEnd {
		return agentapi.Errorf(agentapi.CodeInvalidRequest, "cursor %s is past the output written so far (%s)", c, agentapi.Cursor{Stdout: oEnd, Stderr: eEnd})
	}
	if c.Stdout < oOld || c.Stderr < eOld {
		oldest := agentapi.Cursor{Stdout: max(c.Stdout, oOld), Stderr: max(c.Stderr, eOld)}
		return agentapi.Errorf(agentapi.CodeReplayGone, "output before %s has left the %d-byte replay buffer", oldest, agentapi.RingBytes).
			With(agentapi.DetailOldestOffset, oldest.String())
	}
	return nil
}

// Follow emits the process's events from cursor c: start, stdout/stderr chunks (UTF-8 chunks never split a
// character), keepalive every keepalive interval of silence, and end once the process has ended and all output was
// sent. It returns nil after end, ctx.Err() when the caller left (the process goes on), or emit's error.
func (p *Process) Follow(ctx context.Context, c agentapi.Cursor, keepalive time.Duration, emit func(Event) error) error {
	if err := emit(Event{Name: agentapi.EventStart, ID: c.String(), Data: p.Result(0)}); err != nil {
		return err
	}
	cur := c
	err := p.FollowOutput(ctx, c.Stdout, c.Stderr, FollowOptions{Keepalive: keepalive, MaxChunk: maxChunk, WholeRunes: true}, Sink{
		Data: func(stream string, data []byte, off int64) error {
			if stream == agentapi.StreamStdout {
				cur.Stdout = off + int64(len(data))
			} else {
				cur.Stderr = off + int64(len(data))
			}
			text, enc := agentapi.EncodeData(data)
			return emit(Event{Name: stream, ID: cur.String(), Data: agentapi.OutputChunk{Data: text, Encoding: enc, Offset: off}})
		},
		Keepalive: func() error {
			return emit(Event{Name: agentapi.EventKeepalive, ID: cur.String(), Data: agentapi.KeepaliveData{Time: time.Now().UTC().Format(time.RFC3339)}})
		},
	})
	if err != nil {
		return err
	}
	return emit(Event{Name: agentapi.EventEnd, ID: cur.String(), Data: p.Result(0)})
}

// FollowOptions says how FollowOutput hands out output.
type FollowOptions struct {
	// Keepalive is the silence after which Sink.Keepalive is called; 0 means never.
	Keepalive time.Duration
	// MaxChunk is the most one Data call carries; default 32 KiB.
	MaxChunk int
	// WholeRunes holds back the start of a UTF-8 character whose rest has not been written yet.
	WholeRunes bool
}

// Sink receives what FollowOutput hands out; an error from it ends FollowOutput with that error.
type Sink struct {
	// Data is a chunk of agentapi.StreamStdout or StreamStderr starting at byte offset off of that stream.
	Data func(stream string, data []byte, off int64) error
	// Keepalive is called after every FollowOptions.Keepalive of silence.
	Keepalive func() error
}

// FollowOutput is the one follower of a process's output, under the agent's SSE stream (Follow) and envd's Connect
// stream: it hands out stdout and stderr from the given offsets as they are written, a keepalive after every
// interval of silence, and returns nil once the process has ended and all of its output was handed out (the
// caller then sends its own end), or ctx.Err() when the caller left (the process goes on). A reader that fell
// behind a ring continues at the oldest byte it holds: the chunk's offset shows the gap.
func (p *Process) FollowOutput(ctx context.Context, outOff, errOff int64, opts FollowOptions, sink Sink) error {
	if opts.MaxChunk <= 0 {
		opts.MaxChunk = maxChunk
	}
	streams := []*followed{
		{name: agentapi.StreamStdout, ring: p.stdout, off: outOff},
		{name: agentapi.StreamStderr, ring: p.stderr, off: errOff},
	}
	var ka <-chan time.Time
	var kaTimer *time.Timer
	if opts.Keepalive > 0 && sink.Keepalive != nil {
		kaTimer = time.NewTimer(opts.Keepalive)
		defer kaTimer.Stop()
		ka = kaTimer.C
	}
	for {
		var waits [2]<-chan struct{}
		sent, finished := false, 0
		for i, s := range streams {
			data, off, done, changed := s.next(opts.MaxChunk, opts.WholeRunes)
			if len(data) > 0 {
				if err := sink.Data(s.name, data, off); err != nil {
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
			<-p.done // the rings close just before done
			return nil
		}
		if sent {
			if kaTimer != nil {
				kaTimer.Reset(opts.Keepalive)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-waits[0]:
		case <-waits[1]:
		case <-ka:
			if err := sink.Keepalive(); err != nil {
				return err
			}
			kaTimer.Reset(opts.Keepalive)
		}
	}
}

type followed struct {
	name string
	ring *ring.Ring
	off  int64
}

// next returns the bytes to hand out now (none yet: empty) and their offset, whether the stream is complete, and
// what to wait on.
func (s *followed) next(maxBytes int, wholeRunes bool) ([]byte, int64, bool, <-chan struct{}) {
	data, eof, changed, err := s.ring.ReadAt(s.off, maxBytes)
	var gone *ring.GoneError
	if errors.As(err, &gone) {
		s.off = gone.Oldest
		data, eof, changed, _ = s.ring.ReadAt(s.off, maxBytes)
	}
	if len(data) == 0 {
		return nil, s.off, eof, changed
	}
	n := len(data)
	if wholeRunes && !eof {
		n = CompleteUTF8(data)
	}
	off := s.off
	s.off += int64(n)
	return data[:n], off, false, changed
}

// CompleteUTF8 returns how many leading bytes of b can be sent now: all of b, unless b ends inside a multi-byte
// UTF-8 character that the next bytes may complete; those (at most 3) are held back. Bytes that can never be valid
// UTF-8 are not held back (the chunk goes out base64-encoded).
func CompleteUTF8(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return len(b)
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return len(b) - i
			}
			return len(b)
		}
	}
	return len(b)
}

// Result is the process's record with up to maxOutput bytes of each stream's tail (0: no output, as in the
// start and end events of a stream, whose chunks carried it).
func (p *Process) Result(maxOutput int) agentapi.ExecResult {
	st := p.State()
	r := agentapi.ExecResult{
		ID: p.ID, PID: p.PID, Tag: p.Tag, Cmd: p.Cmd, Argv: p.Argv, Status: st.Status, ExitCode: st.ExitCode,
		Signal: st.Signal, StartedAt: p.started.UTC().Format(time.RFC3339Nano), PTY: p.PTY,
	}
	end := time.Now()
	if !st.Ended.IsZero() {
		end = st.Ended
		r.EndedAt = st.Ended.UTC().Format(time.RFC3339Nano)
	}
	r.DurationMS = end.Sub(p.started).Milliseconds()
	_, r.StdoutOffset, _ = p.stdout.Bounds()
	_, r.StderrOffset, _ = p.stderr.Bounds()
	if maxOutput > 0 {
		var tOut, tErr bool
		r.Stdout, r.StdoutEncoding, tOut = tail(p.stdout, maxOutput)
		r.Stderr, r.StderrEncoding, tErr = tail(p.stderr, maxOutput)
		r.Truncated = tOut || tErr
	}
	return r
}

// tail returns a stream's last bytes, starting on a character boundary, and whether earlier bytes were left out.
func tail(rg *ring.Ring, maxBytes int) (string, string, bool) {
	b, start := rg.Tail(maxBytes)
	if start > 0 {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
			start++
		}
	}
	text, enc := agentapi.EncodeData(b)
	return text, enc, start > 0
}
