package envd

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
)

// events reads a stream's events into a channel, closed at the stream's end.
func events(t *testing.T, receive func() bool, msg func() *pb.ProcessEvent) <-chan *pb.ProcessEvent {
	t.Helper()
	ch := make(chan *pb.ProcessEvent, 256)
	go func() {
		defer close(ch)
		for receive() {
			ch <- msg()
		}
	}()
	return ch
}

// until reads events until one satisfies ok (failing if the stream ends first) and returns it.
func until(t *testing.T, ch <-chan *pb.ProcessEvent, what string, ok func(*pb.ProcessEvent) bool) *pb.ProcessEvent {
	t.Helper()
	for ev := range ch {
		if ok(ev) {
			return ev
		}
	}
	t.Fatalf("the stream ended before %s", what)
	return nil
}

func listed(t *testing.T, te *testEnvd, pid uint32) *pb.ProcessInfo {
	t.Helper()
	res, err := te.proc.List(ctxFor(t), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Msg.GetProcesses() {
		if p.GetPid() == pid {
			return p
		}
	}
	return nil
}

// TestBackgroundProcess is what commands.run({background:true}) then list, sendStdin, connect and kill do.
func TestBackgroundProcess(t *testing.T) {
	te := newTestEnvd(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	stdin, tag := true, "bg"
	st, err := te.proc.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: &stdin, Tag: &tag}))
	if err != nil {
		t.Fatal(err)
	}
	ch := events(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() })
	pid := until(t, ch, "start", func(ev *pb.ProcessEvent) bool { return ev.GetStart() != nil }).GetStart().GetPid()
	if info := listed(t, te, pid); info == nil || info.GetConfig().GetCmd() != "cat" || info.GetTag() != "bg" {
		t.Fatalf("list: %+v", info)
	}
	if _, err := te.proc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}},
		Input:   &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("hi\n")}},
	})); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "the echoed input", func(ev *pb.ProcessEvent) bool { return string(ev.GetData().GetStdout()) == "hi\n" })
	cancel() // the client leaves; the process goes on
	for range ch {
	}

	// Connect by tag re-attaches: start again, then only new output
	cst, err := te.proc.Connect(ctxFor(t), connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "bg"}}}))
	if err != nil {
		t.Fatal(err)
	}
	cch := events(t, cst.Receive, func() *pb.ProcessEvent { return cst.Msg().GetEvent() })
	if got := until(t, cch, "start", func(ev *pb.ProcessEvent) bool { return true }); got.GetStart().GetPid() != pid {
		t.Fatalf("first event %v", got)
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := te.proc.SendInput(ctxFor(t), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("again\n")}}})); err != nil {
		t.Fatal(err)
	}
	if got := until(t, cch, "new output", func(ev *pb.ProcessEvent) bool { return ev.GetData() != nil }); string(got.GetData().GetStdout()) != "again\n" {
		t.Fatalf("replayed old output: %q", got.GetData().GetStdout())
	}

	// kill: gone from List when SendSignal returns; the stream ends with envd's signal end event
	if _, err := te.proc.SendSignal(ctxFor(t), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	if info := listed(t, te, pid); info != nil {
		t.Fatalf("killed process still listed: %+v", info)
	}
	end := until(t, cch, "end", func(ev *pb.ProcessEvent) bool { return ev.GetEnd() != nil }).GetEnd()
	if end.GetExitCode() != -1 || end.GetExited() || end.GetStatus() != "signal: killed" {
		t.Fatalf("end %+v", end)
	}
	if err := cst.Err(); err != nil {
		t.Fatal(err)
	}
	_, err = te.proc.SendSignal(ctxFor(t), connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 999999}}, Signal: pb.Signal_SIGNAL_SIGKILL}))
	wantCode(t, err, connect.CodeNotFound)
}

func TestCloseStdinEndsInput(t *testing.T) {
	te := newTestEnvd(t)
	stdin := true
	st, err := te.proc.Start(ctxFor(t), connect.NewRequest(&pb.StartRequest{Process: bash("wc -c"), Stdin: &stdin}))
	if err != nil {
		t.Fatal(err)
	}
	ch := events(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() })
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: until(t, ch, "start", func(*pb.ProcessEvent) bool { return true }).GetStart().GetPid()}}
	if _, err := te.proc.SendInput(ctxFor(t), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("12345")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := te.proc.CloseStdin(ctxFor(t), connect.NewRequest(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	out := until(t, ch, "output", func(ev *pb.ProcessEvent) bool { return ev.GetData() != nil })
	if strings.TrimSpace(string(out.GetData().GetStdout())) != "5" {
		t.Fatalf("wc read %q", out.GetData().GetStdout())
	}
	if end := until(t, ch, "end", func(ev *pb.ProcessEvent) bool { return ev.GetEnd() != nil }).GetEnd(); end.GetExitCode() != 0 {
		t.Fatalf("end %+v", end)
	}
}

// TestPTY is pty.create, sendInput, resize and kill.
func TestPTY(t *testing.T) {
	te := newTestEnvd(t)
	st, err := te.proc.Start(ctxFor(t), connect.NewRequest(&pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-i", "-l"}, Envs: map[string]string{"TERM": "xterm-256color", "PS1": "$ "}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	ch := events(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() })
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: until(t, ch, "start", func(*pb.ProcessEvent) bool { return true }).GetStart().GetPid()}}
	if _, err := te.proc.Update(ctxFor(t), connect.NewRequest(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 30}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := te.proc.SendInput(ctxFor(t), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("echo size=$(stty size) $((6*7))\n")}}})); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	until(t, ch, "the command's output on the terminal", func(ev *pb.ProcessEvent) bool {
		seen.Write(ev.GetData().GetPty())
		return strings.Contains(seen.String(), "size=30 100 42")
	})
	_, err = te.proc.CloseStdin(ctxFor(t), connect.NewRequest(&pb.CloseStdinRequest{Process: sel}))
	wantCode(t, err, connect.CodeFailedPrecondition)
	if _, err := te.proc.SendSignal(ctxFor(t), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "end", func(ev *pb.ProcessEvent) bool { return ev.GetEnd() != nil })
}

// TestKeepalive: a silent process's stream carries keepalive events at the interval the client asked for.
func TestKeepalive(t *testing.T) {
	te := newTestEnvd(t)
	stdin := true
	req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: &stdin})
	req.Header().Set("Keepalive-Ping-Interval", "1")
	st, err := te.proc.Start(ctxFor(t), req)
	if err != nil {
		t.Fatal(err)
	}
	ch := events(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() })
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: until(t, ch, "start", func(*pb.ProcessEvent) bool { return true }).GetStart().GetPid()}}
	until(t, ch, "a keepalive", func(ev *pb.ProcessEvent) bool { return ev.GetKeepalive() != nil })
	if _, err := te.proc.CloseStdin(ctxFor(t), connect.NewRequest(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "end", func(ev *pb.ProcessEvent) bool { return ev.GetEnd() != nil })
}

// TestStreamInput writes a client stream of inputs (start{process}, then data) to a process, in order.
func TestStreamInput(t *testing.T) {
	te := newTestEnvd(t)
	stdin := true
	st, err := te.proc.Start(ctxFor(t), connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: &stdin}))
	if err != nil {
		t.Fatal(err)
	}
	ch := events(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() })
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: until(t, ch, "start", func(*pb.ProcessEvent) bool { return true }).GetStart().GetPid()}}
	in := te.proc.StreamInput(ctxFor(t))
	msgs := []*pb.StreamInputRequest{
		{Event: &pb.StreamInputRequest_Start{Start: &pb.StreamInputRequest_StartEvent{Process: sel}}},
		{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("one ")}}}}},
		{Event: &pb.StreamInputRequest_Keepalive{Keepalive: &pb.StreamInputRequest_KeepAlive{}}},
		{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}},
	}
	for _, m := range msgs {
		if err := in.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	until(t, ch, "the streamed input echoed", func(ev *pb.ProcessEvent) bool {
		got.Write(ev.GetData().GetStdout())
		return got.String() == "one two\n"
	})
	if _, err := te.proc.SendSignal(ctxFor(t), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
}
