package execd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
	"github.com/sandgate/sandgate/agentimage/internal/sse"
)

// readChunk is the most read from a ring at once.
const readChunk = 32 << 10

// runCommand starts a command and streams it as execd does: init (text = the command id), stdout and stderr one
// line per event, ping every few seconds, then execution_complete (exit 0) or error (evalue = the exit code).
// A background command answers init and execution_complete at once; its combined output is read with logs.
func (a *API) runCommand(w http.ResponseWriter, r *http.Request) {
	var req agentapi.ExecdRunCommand
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Command == "" {
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid request, validation error: command is required"))
		return
	}
	if req.TimeoutMS < 0 {
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid request, validation error: timeout must be at least 1 (milliseconds)"))
		return
	}
	if err := sameUser(req.UID, req.GID); err != nil {
		writeError(w, err)
		return
	}
	dir, err := a.commandDir(req.Cwd)
	if err != nil {
		writeError(w, err)
		return
	}
	// The process belongs to the agent, not to this request: it goes on if the client leaves (as execd's do).
	p, err := a.Procs.Start(process.Spec{
		Cmd: req.Command, Dir: dir, Env: req.Envs, Timeout: time.Duration(req.TimeoutMS) * time.Millisecond,
		Tag: "execd", Combined: req.Background,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	sw := sse.NewWriter(w)
	if err := sw.SendBare(agentapi.ExecdEvent{Type: agentapi.ExecdEventInit, Text: p.ID, Timestamp: nowMS()}); err != nil {
		return
	}
	if req.Background {
		_ = sw.SendBare(agentapi.ExecdEvent{Type: agentapi.ExecdEventComplete, ExecutionTime: time.Since(p.Started()).Milliseconds(), Timestamp: nowMS()})
		return
	}
	_ = a.stream(r.Context(), sw, p)
}

// sameUser refuses uid and gid other than the agent's own: it holds no capability to switch users (execd runs
// as root and can).
func sameUser(uid, gid *uint32) error {
	if uid != nil && int(*uid) != os.Getuid() {
		return errorf(http.StatusBadRequest, agentapi.ExecdCodeNotSupported, "uid %d: commands run as the sandbox user (uid %d); switching users is not supported", *uid, os.Getuid())
	}
	if gid != nil && int(*gid) != os.Getgid() {
		return errorf(http.StatusBadRequest, agentapi.ExecdCodeNotSupported, "gid %d: commands run with the sandbox user's group (gid %d); switching groups is not supported", *gid, os.Getgid())
	}
	return nil
}

// commandDir is the directory a command starts in: "" is the workspace, a relative path is taken from the
// workspace, "~" and $VARS expand as in paths. Any directory the sandbox user can enter is accepted, as execd does:
// a working directory is not a file API (the command could `cd /tmp` itself), so the workspace confinement of the
// file routes does not apply to it. The agent runs as that user, so "can enter" is the kernel's own answer.
func (a *API) commandDir(cwd string) (string, error) {
	p, err := a.expand(cwd)
	if err != nil {
		return "", err
	}
	dir := a.Files.Root().Dir()
	if p != "" {
		if filepath.IsAbs(p) {
			dir = filepath.Clean(p)
		} else {
			dir = filepath.Join(dir, p)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return "", errorf(http.StatusForbidden, agentapi.ExecdCodePathNotAllowed, "cwd %q: the sandbox user cannot enter it", cwd)
		}
		return "", errorf(http.StatusNotFound, agentapi.ExecdCodeFileNotFound, "cwd %q: no such directory", cwd)
	}
	if !fi.IsDir() {
		return "", errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "cwd %q is not a directory", cwd)
	}
	if err := unix.Access(dir, unix.X_OK); err != nil {
		return "", errorf(http.StatusForbidden, agentapi.ExecdCodePathNotAllowed, "cwd %q: the sandbox user cannot enter it", cwd)
	}
	return dir, nil
}

// stream sends p's output as line events until it ends, then the final event. It returns early, leaving the
// process running, when the client goes away.
func (a *API) stream(ctx context.Context, sw *sse.Writer, p *process.Process) error {
	type stream struct {
		ring  *ring.Ring
		off   int64
		lines *LineSplitter
	}
	// Line events are queued and flushed once per round: a flush per line would let a chatty command outrun the
	// stream and its 1 MiB ring.
	var buf []byte
	send := func(typ string) func(string) error {
		return func(text string) error {
			buf = AppendLineEvent(buf[:0], typ, text, nowMS())
			return sw.QueueRaw(buf)
		}
	}
	streams := []*stream{
		{ring: p.Stdout(), lines: NewLineSplitter(send(agentapi.ExecdEventStdout))},
		{ring: p.Stderr(), lines: NewLineSplitter(send(agentapi.ExecdEventStderr))},
	}
	ping := time.NewTicker(a.Ping)
	defer ping.Stop()
	for {
		var waits []<-chan struct{}
		progressed, finished := false, 0
		for _, s := range streams {
			data, eof, changed, err := s.ring.ReadAt(s.off, readChunk)
			var gone *ring.GoneError
			if errors.As(err, &gone) { // fell behind the ring: go on at the oldest byte held
				s.off = gone.Oldest
				data, eof, changed, _ = s.ring.ReadAt(s.off, readChunk)
			}
			if len(data) > 0 {
				s.off += int64(len(data))
				if err := s.lines.Write(data); err != nil {
					return err
				}
				progressed = true
			}
			if eof {
				finished++
			}
			waits = append(waits, changed)
		}
		if finished == len(streams) {
			for _, s := range streams {
				if err := s.lines.Flush(); err != nil {
					return err
				}
			}
			<-p.Done() // the rings close just before done
			return sw.SendBare(finalEvent(p))
		}
		if progressed {
			if err := sw.Flush(); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-waits[0]:
		case <-waits[1]:
		case <-ping.C:
			if err := sw.SendBare(agentapi.ExecdEvent{Type: agentapi.ExecdEventPing, Text: agentapi.ExecdPingText, Timestamp: nowMS()}); err != nil {
				return err
			}
		}
	}
}

// finalEvent is execution_complete for exit 0, else error with the exit code (128+n for a signal) as evalue.
func finalEvent(p *process.Process) agentapi.ExecdEvent {
	st := p.State()
	code := exitCode(st)
	if code == 0 && st.Status == agentapi.StatusExited {
		return agentapi.ExecdEvent{Type: agentapi.ExecdEventComplete, ExecutionTime: st.Ended.Sub(p.Started()).Milliseconds(), Timestamp: nowMS()}
	}
	why := endReason(st)
	return agentapi.ExecdEvent{Type: agentapi.ExecdEventErr, Timestamp: nowMS(), Error: &agentapi.ExecdEventError{
		EName: agentapi.ExecdErrorNameExec, EValue: strconv.Itoa(code), Traceback: []string{why},
	}}
}

func exitCode(st process.State) int {
	if st.ExitCode == nil {
		return -1
	}
	return *st.ExitCode
}

// endReason says how a process ended in the words of Go's exec errors, which execd reports ("exit status 3",
// "signal: killed"), plus why the agent ended it.
func endReason(st process.State) string {
	var why string
	switch {
	case st.Signal != "":
		why = "signal: " + st.Signal
	case st.ExitCode != nil:
		why = fmt.Sprintf("exit status %d", *st.ExitCode)
	}
	switch st.Status {
	case agentapi.StatusTimedOut:
		why = "timed out (" + why + ")"
	case agentapi.StatusKilled:
		why = "interrupted (" + why + ")"
	}
	return why
}

func nowMS() int64 { return time.Now().UnixMilli() }

// interruptCommand ends a command's process group (SIGTERM, SIGKILL after a grace period) and waits briefly for
// it to go.
func (a *API) interruptCommand(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, missingQuery("id"))
		return
	}
	p, err := a.Procs.Get(id)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, agentapi.ExecdCodeRuntimeError, "error interrupting command: no command %q", id))
		return
	}
	select {
	case <-p.Done():
		writeError(w, errorf(http.StatusConflict, agentapi.ExecdCodeRuntimeError, "error interrupting command: command %s is not running", id))
		return
	default:
	}
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
	case <-r.Context().Done():
		return
	}
	ok(w)
}

// commandInfo serves GET /command/status/{id} and GET /command/{id}/logs.
func (a *API) commandInfo(w http.ResponseWriter, r *http.Request) {
	first, second := r.PathValue("a"), r.PathValue("b")
	switch {
	case first == "status":
		a.commandStatus(w, second)
	case second == "logs":
		a.commandLogs(w, r, first)
	default:
		writeError(w, errorf(http.StatusNotFound, agentapi.ExecdCodeInvalidRequest, "no route %s", r.URL.Path))
	}
}

func (a *API) commandStatus(w http.ResponseWriter, id string) {
	p, err := a.Procs.Get(id)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, agentapi.ExecdCodeInvalidRequest, "command not found: %s", id))
		return
	}
	st := p.State()
	res := agentapi.ExecdCommandStatus{ID: p.ID, Content: p.Cmd, Running: st.Ended.IsZero(), StartedAt: p.Started().UTC()}
	if !st.Ended.IsZero() {
		code := exitCode(st)
		res.ExitCode = &code
		end := st.Ended.UTC()
		res.FinishedAt = &end
		if code != 0 || st.Status != agentapi.StatusExited {
			res.Error = endReason(st)
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// commandLogs answers a background command's combined output from byte cursor on, as text, with the cursor to
// ask from next in EXECD-COMMANDS-TAIL-CURSOR. Output older than the 1 MiB ring is gone: the answer starts at the
// oldest byte held.
func (a *API) commandLogs(w http.ResponseWriter, r *http.Request, id string) {
	cursor, err := ParseCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := a.Procs.Get(id)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "command not found: %s", id))
		return
	}
	if !p.Combined {
		writeError(w, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "command %s is not running in background", id))
		return
	}
	oldest, end, _ := p.Stdout().Bounds()
	var out []byte
	next := cursor
	if cursor < end {
		off := max(cursor, oldest)
		for off < end {
			data, _, _, err := p.Stdout().ReadAt(off, readChunk)
			if err != nil || len(data) == 0 {
				break
			}
			out = append(out, data...)
			off += int64(len(data))
		}
		next = off
	}
	w.Header().Set(agentapi.ExecdTailCursorHeader, strconv.FormatInt(next, 10))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// ParseCursor reads the logs cursor: a byte offset, 0 when absent.
func ParseCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusBadRequest, agentapi.ExecdCodeInvalidRequest, "invalid query parameter 'cursor': %q (want a byte offset)", s)
	}
	return n, nil
}
