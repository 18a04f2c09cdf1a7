package main_test

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/internal/testing/testenv"
)

// TestExec drives exec and processes against the agent in a hardened container.
func TestExec(t *testing.T) {
	testenv.Integration(t)
	sb := testenv.RunSandbox(t, testenv.SandboxOptions{Capabilities: []string{"shell"}})
	c := clientFor(sb)

	t.Run("json result, non-zero exit is a result", func(t *testing.T) {
		ctx := testCtx(t)
		sb.Exec(t, "mkdir", "-p", "/workspace/sub")
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: `echo "$PWD $TERM $PAGER $X"; echo oops >&2; exit 3`, Cwd: "sub", Env: map[string]string{"X": "42"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusExited || res.ExitCode == nil || *res.ExitCode != 3 ||
			res.Stdout != "/workspace/sub dumb cat 42\n" || res.Stderr != "oops\n" || res.StdoutOffset != int64(len(res.Stdout)) || res.Truncated {
			t.Fatalf("result: %+v", res)
		}
		res, err = c.Exec(ctx, agentapi.ExecRequest{Argv: []string{"printf", "%s", "a b"}})
		if err != nil || res.Stdout != "a b" {
			t.Fatalf("argv: %+v %v", res, err)
		}
	})

	t.Run("bad requests are typed errors", func(t *testing.T) {
		ctx := testCtx(t)
		_, err := c.Exec(ctx, agentapi.ExecRequest{Argv: []string{"no-such-binary"}})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)
		_, err = c.Exec(ctx, agentapi.ExecRequest{Cmd: "true", Cwd: "../etc"})
		wantCode(t, err, agentapi.CodeInvalidPath, http.StatusBadRequest)
		_, err = c.Exec(ctx, agentapi.ExecRequest{})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)
		_, err = c.Process(ctx, "proc_nope")
		wantCode(t, err, agentapi.CodeNotFound, http.StatusNotFound)
		// a start failure on a streamed exec is still a JSON error: headers are not committed yet
		_, err = c.ExecStream(ctx, agentapi.ExecRequest{Argv: []string{"no-such-binary"}})
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)
	})

	t.Run("concurrent requests keep their own timeout and env", func(t *testing.T) {
		ctx := testCtx(t)
		var wg sync.WaitGroup
		var slow, fast agentapi.ExecResult
		var errSlow, errFast error
		wg.Add(2)
		go func() {
			defer wg.Done()
			slow, errSlow = c.Exec(ctx, agentapi.ExecRequest{Cmd: "sleep 1.5; echo $WHO", Env: map[string]string{"WHO": "slow"}})
		}()
		go func() {
			defer wg.Done()
			fast, errFast = c.Exec(ctx, agentapi.ExecRequest{Cmd: "echo $WHO; sleep 30", TimeoutMS: 300, Env: map[string]string{"WHO": "fast"}})
		}()
		wg.Wait()
		if errSlow != nil || errFast != nil {
			t.Fatal(errSlow, errFast)
		}
		if slow.Status != agentapi.StatusExited || slow.Stdout != "slow\n" {
			t.Fatalf("slow: %+v", slow)
		}
		if fast.Status != agentapi.StatusTimedOut || fast.Stdout != "fast\n" {
			t.Fatalf("fast: %+v", fast)
		}
	})

	t.Run("sse stream with utf-8 safe chunks", func(t *testing.T) {
		ctx := testCtx(t)
		// the euro sign's three bytes arrive in two writes: no chunk may split it
		s, err := c.ExecStream(ctx, agentapi.ExecRequest{Cmd: `printf 'a\xe2\x82'; sleep 0.3; printf '\xac b'; echo err >&2`})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var names []string
		var out, errOut strings.Builder
		var end *agentapi.ExecResult
		for s.Next() {
			ev := s.Event()
			names = append(names, ev.Event)
			switch ev.Event {
			case agentapi.EventStdout, agentapi.EventStderr:
				if ev.Chunk.Encoding != agentapi.EncodingUTF8 || !utf8.ValidString(ev.Chunk.Data) {
					t.Fatalf("chunk not valid utf8: %+v", ev.Chunk)
				}
				if ev.Event == agentapi.EventStdout {
					if ev.Chunk.Offset != int64(out.Len()) {
						t.Fatalf("offset %d, want %d", ev.Chunk.Offset, out.Len())
					}
					out.WriteString(ev.Chunk.Data)
				} else {
					errOut.WriteString(ev.Chunk.Data)
				}
			case agentapi.EventEnd:
				end = ev.Process
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if names[0] != agentapi.EventStart || names[len(names)-1] != agentapi.EventEnd || end == nil {
			t.Fatalf("events %v", names)
		}
		if out.String() != "a€ b" || errOut.String() != "err\n" || end.Status != agentapi.StatusExited || *end.ExitCode != 0 {
			t.Fatalf("stdout %q stderr %q end %+v", out.String(), errOut.String(), end)
		}
	})

	t.Run("binary output is base64", func(t *testing.T) {
		ctx := testCtx(t)
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: `printf '\xff\x00\x01'`})
		if err != nil {
			t.Fatal(err)
		}
		b, err := res.StdoutBytes()
		if err != nil || res.StdoutEncoding != agentapi.EncodingBase64 || string(b) != "\xff\x00\x01" {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("yield then resume by Last-Event-ID", func(t *testing.T) {
		ctx := testCtx(t)
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.2; done", YieldMS: 100})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusRunning || res.ExitCode != nil {
			t.Fatalf("want running after yield: %+v", res)
		}
		list, err := c.Processes(ctx)
		if err != nil || !containsProcess(list, res.ID) {
			t.Fatalf("process list: %v %v", list, err)
		}
		s, err := c.ProcessEvents(ctx, res.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for s.Next() {
			if ev := s.Event(); ev.Event == agentapi.EventStdout {
				got.WriteString(ev.Chunk.Data)
				break
			}
		}
		last := s.LastID()
		s.Close() // drop the stream mid-way, as a flaky network would

		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, sb.URL+"/v1/processes/"+res.ID+"/events", nil)
		req.Header.Set(agentapi.TokenHeader, sb.Token)
		req.Header.Set("Last-Event-ID", last)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("resume: %v %v", resp.Status, err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		sawEnd := false
		for !sawEnd {
			ev, err := agentapi.ReadSSE(r)
			if err != nil {
				t.Fatalf("after %q: %v", got.String(), err)
			}
			switch ev.Event {
			case agentapi.EventStdout:
				got.WriteString(ev.Chunk.Data)
			case agentapi.EventEnd:
				sawEnd = true
			}
		}
		if got.String() != "line1\nline2\nline3\nline4\nline5\nline6\n" {
			t.Fatalf("resumed output %q", got.String())
		}
	})

	t.Run("replay gone", func(t *testing.T) {
		ctx := testCtx(t)
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "head -c 3000000 /dev/zero | tr '\\0' a", MaxOutputBytes: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.StdoutOffset != 3000000 || !res.Truncated || res.Stdout != "aaaaaaaaaa" {
			t.Fatalf("result: offset %d truncated %v stdout %q", res.StdoutOffset, res.Truncated, res.Stdout)
		}
		_, err = c.ProcessEvents(ctx, res.ID, "0")
		e := wantCode(t, err, agentapi.CodeReplayGone, http.StatusGone)
		if want := (agentapi.Cursor{Stdout: 3000000 - agentapi.RingBytes}).String(); e.Details[agentapi.DetailOldestOffset] != want {
			t.Fatalf("details %v", e.Details)
		}
		// from the oldest offset it works
		s, err := c.ProcessEvents(ctx, res.ID, e.Details[agentapi.DetailOldestOffset].(string))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for s.Next() {
			if ev := s.Event(); ev.Event == agentapi.EventStdout {
				n += len(ev.Chunk.Data)
			}
		}
		s.Close()
		if s.Err() != nil || n != agentapi.RingBytes {
			t.Fatalf("replayed %d bytes, %v", n, s.Err())
		}
	})

	t.Run("timeout kills the whole process group", func(t *testing.T) {
		ctx := testCtx(t)
		start := time.Now()
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "sh -c 'sleep 100 & sleep 100'", TimeoutMS: 500})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusTimedOut || time.Since(start) > 20*time.Second {
			t.Fatalf("want timed_out soon, got %+v after %s", res, time.Since(start))
		}
		if out, code := dockerExec(t, sb, "pgrep", "-x", "sleep"); code == 0 {
			t.Fatalf("sleep processes survived the timeout: %s", out)
		}
	})

	t.Run("a background child holding the pipes does not wedge the request", func(t *testing.T) {
		ctx := testCtx(t)
		start := time.Now()
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "setsid sleep 60 & echo started"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusExited || res.Stdout != "started\n" || time.Since(start) > 20*time.Second {
			t.Fatalf("%+v after %s", res, time.Since(start))
		}
		dockerExec(t, sb, "pkill", "-x", "sleep")
	})

	t.Run("stdin", func(t *testing.T) {
		ctx := testCtx(t)
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "tr a-z A-Z", Stdin: "given\n"})
		if err != nil || res.Stdout != "GIVEN\n" {
			t.Fatalf("%+v %v", res, err)
		}
		res, err = c.Exec(ctx, agentapi.ExecRequest{Cmd: "cat", KeepStdin: true, YieldMS: 100})
		if err != nil || res.Status != agentapi.StatusRunning {
			t.Fatalf("%+v %v", res, err)
		}
		if err := c.ProcessStdin(ctx, res.ID, agentapi.StdinRequest{Data: "one\n"}); err != nil {
			t.Fatal(err)
		}
		if err := c.ProcessStdin(ctx, res.ID, agentapi.StdinRequest{Data: "dHdvCg==", Encoding: agentapi.EncodingBase64, EOF: true}); err != nil {
			t.Fatal(err)
		}
		final := waitFinal(t, ctx, c, res.ID)
		if final.Stdout != "one\ntwo\n" || *final.ExitCode != 0 {
			t.Fatalf("%+v", final)
		}
		err = c.ProcessStdin(ctx, res.ID, agentapi.StdinRequest{Data: "late"})
		wantCode(t, err, agentapi.CodeConflict, http.StatusConflict)
	})

	t.Run("signals and kill", func(t *testing.T) {
		ctx := testCtx(t)
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "trap 'echo got-int; exit 7' INT; while true; do sleep 0.1; done", YieldMS: 300})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ProcessSignal(ctx, res.ID, "SIGINT"); err != nil {
			t.Fatal(err)
		}
		final := waitFinal(t, ctx, c, res.ID)
		if final.Stdout != "got-int\n" || *final.ExitCode != 7 {
			t.Fatalf("%+v", final)
		}
		err = c.ProcessSignal(ctx, res.ID, "BOGUS")
		wantCode(t, err, agentapi.CodeInvalidRequest, http.StatusBadRequest)

		res, err = c.Exec(ctx, agentapi.ExecRequest{Cmd: "sleep 100", YieldMS: 100})
		if err != nil {
			t.Fatal(err)
		}
		killed, err := c.KillProcess(ctx, res.ID)
		if err != nil || killed.Status != agentapi.StatusKilled || killed.Signal != "SIGTERM" {
			t.Fatalf("%+v %v", killed, err)
		}
	})

	t.Run("pty exec", func(t *testing.T) {
		ctx := testCtx(t)
		res, err := c.Exec(ctx, agentapi.ExecRequest{Cmd: "stty size; test -t 1 && echo tty", PTY: &agentapi.PTYSize{Cols: 91, Rows: 17}})
		if err != nil || !strings.Contains(res.Stdout, "17 91") || !strings.Contains(res.Stdout, "tty") {
			t.Fatalf("%+v %v", res, err)
		}
	})
}

func containsProcess(list []agentapi.ExecResult, id string) bool {
	for _, p := range list {
		if p.ID == id {
			return true
		}
	}
	return false
}
