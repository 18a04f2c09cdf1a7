package envd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	pb "github.com/sandgate/sandgate/agentimage/internal/envd/envdpb/process"
	"github.com/sandgate/sandgate/agentimage/internal/process"
)

const (
	// readChunk is the most output one data event carries.
	readChunk = 64 << 10
	// killWait bounds how long SendSignal(SIGKILL) waits for the process to be reaped, so that a List right after
	// it no longer shows the process, as E2B's SDK expects.
	killWait = 5 * time.Second
	// inputWait bounds one write to a process's input.
	inputWait = 10 * time.Second
)

// processService implements process.Process over the agent's process manager.
type processService struct {
	s *Service
}

// Start runs a process and streams its events: start{pid}, data, end, then the end of the stream. The process
// belongs to the agent, not to the request: a client that leaves can Connect again. The request's deadline
// (Connect-Timeout-Ms) is the process's deadline, as in envd.
func (ps *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	s := ps.s
	if err := s.authorize(req.Header()); err != nil {
		return err
	}
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return invalidArg("process.cmd is required")
	}
	sandboxVars, err := sandboxEnv(req.Header())
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	dir, err := s.workdir(cfg.GetCwd())
	if err != nil {
		return err
	}
	if s.procs.full() {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d processes are already tracked; wait for some to end", maxProcs))
	}
	spec := process.Spec{
		Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Dir: dir, Env: s.processEnv(dir, sandboxVars, cfg.GetEnvs()),
		KeepStdin: req.Msg.Stdin == nil || req.Msg.GetStdin(), Tag: "e2b",
	}
	if req.Msg.Pty != nil {
		size := req.Msg.GetPty().GetSize()
		spec.PTY = &agentapi.PTYSize{Cols: clampSize(size.GetCols()), Rows: clampSize(size.GetRows())}
	}
	if dl, ok := ctx.Deadline(); ok {
		spec.Timeout = max(time.Until(dl), time.Millisecond)
	}
	p, err := s.d.Procs.Start(spec)
	if err != nil {
		return asConnect(err)
	}
	e := &entry{p: p, config: cfg, tag: req.Msg.GetTag(), hasTag: req.Msg.Tag != nil}
	s.procs.add(e)
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) }
	return follow(ctx, p, 0, 0, keepaliveInterval(req.Header()), send)
}

// Connect re-attaches to a process: start{pid}, then only output written from now on, then end.
func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	if err := ps.s.authorize(req.Header()); err != nil {
		return err
	}
	e, err := ps.s.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	_, outEnd, _ := e.p.Stdout().Bounds()
	_, errEnd, _ := e.p.Stderr().Bounds()
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	return follow(ctx, e.p, outEnd, errEnd, keepaliveInterval(req.Header()), send)
}

// List answers the running processes started through envd (PTYs included).
func (ps *processService) List(_ context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	if err := ps.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	out := &pb.ListResponse{}
	for _, e := range ps.s.procs.running() {
		info := &pb.ProcessInfo{Config: e.config, Pid: uint32(e.p.PID)}
		if e.hasTag {
			info.Tag = &e.tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// SendInput writes to a process's stdin or terminal.
func (ps *processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	if err := ps.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	e, err := ps.s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(ctx, e.p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// StreamInput writes a client stream of inputs to one process, in order: start{process} first, then data.
func (ps *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	if err := ps.s.authorize(stream.RequestHeader()); err != nil {
		return nil, err
	}
	var target *entry
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			e, err := ps.s.find(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			target = e
		case *pb.StreamInputRequest_Data:
			if target == nil {
				return nil, invalidArg("the first message of StreamInput must be start{process}")
			}
			if err := writeInput(ctx, target.p, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

// SendSignal sends SIGTERM or SIGKILL to the process's group. After SIGKILL it waits (bounded) until the process
// is reaped, so it has left List when the call returns.
func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	if err := ps.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	e, err := ps.s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, invalidArg("signal %v is not one of SIGNAL_SIGTERM, SIGNAL_SIGKILL", req.Msg.GetSignal())
	}
	if !running(e.p) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found (it has ended)", e.p.PID))
	}
	if sig == syscall.SIGKILL {
		// SIGKILL the group now (not after Kill's grace period), then let Kill record it as killed.
		_ = syscall.Kill(-e.p.PID, syscall.SIGKILL)
		e.p.Kill()
		t := time.NewTimer(killWait)
		defer t.Stop()
		select {
		case <-e.p.Done():
		case <-t.C:
		case <-ctx.Done():
		}
	} else if err := e.p.Signal(sig); err != nil {
		return nil, asConnect(err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

// CloseStdin ends a process's standard input. A terminal has none to close: send ^D (0x04) instead, as envd says.
func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	if err := ps.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	e, err := ps.s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if e.p.PTY {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("a PTY's stdin cannot be closed: send Ctrl+D (0x04) as input instead"))
	}
	if err := e.p.WriteStdin(ctx, nil, true); err != nil {
		return nil, asConnect(err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// Update resizes a process's terminal.
func (ps *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	if err := ps.s.authorize(req.Header()); err != nil {
		return nil, err
	}
	e, err := ps.s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		size := req.Msg.GetPty().GetSize()
		if err := e.p.Resize(clampSize(size.GetCols()), clampSize(size.GetRows())); err != nil {
			return nil, asConnect(err)
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

// find resolves a selector, or answers not_found as envd does.
func (s *Service) find(sel *pb.ProcessSelector) (*entry, error) {
	if sel == nil || sel.GetSelector() == nil {
		return nil, invalidArg("process selector (pid or tag) is required")
	}
	e, ok := s.procs.find(sel)
	if !ok {
		if t, isTag := sel.GetSelector().(*pb.ProcessSelector_Tag); isTag {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", t.Tag))
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", sel.GetPid()))
	}
	return e, nil
}

func writeInput(ctx context.Context, p *process.Process, in *pb.ProcessInput) error {
	var data []byte
	switch v := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		data = v.Stdin
	case *pb.ProcessInput_Pty:
		data = v.Pty
	default:
		return invalidArg("input (stdin or pty) is required")
	}
	ctx, cancel := context.WithTimeout(ctx, inputWait)
	defer cancel()
	if err := p.WriteStdin(ctx, data, false); err != nil {
		return asConnect(err)
	}
	return nil
}

// workdir resolves a process's working directory: empty is the home, relative is joined to it, and it must be an
// existing directory. A directory in the home is named as processes see the home (HomeAlias); any other directory
// (E2B code runs commands in /tmp) is used as it is: a process can change directory anyway, so the working
// directory is not a confinement boundary as file paths are.
func (s *Service) workdir(cwd string) (string, error) {
	dir := s.paths.clean(cwd)
	if real, err := s.paths.resolve(cwd); err == nil {
		dir = s.homeView(real)
	} else if !errors.Is(err, errOutside) {
		return "", connect.NewError(fsCode(err), err)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", invalidArg("cwd '%s' does not exist", cwd)
	}
	return dir, nil
}

// homeView names a workspace directory as processes should see it: under HomeAlias when the image provides it.
func (s *Service) homeView(real string) string {
	if s.d.HomeAlias == "" {
		return real
	}
	ext := s.paths.external(real)
	if ext == real {
		return real
	}
	return s.d.HomeAlias + ext[len(HomeDir):]
}

// processEnv layers a process's environment as envd does: the user's HOME/USER/LOGNAME, then the sandbox's
// variables, then the request's; later entries win. PATH and the rest come from the agent's environment.
func (s *Service) processEnv(dir string, sandboxVars, request map[string]string) map[string]string {
	home := s.homeView(s.d.Root.Dir())
	env := map[string]string{"HOME": home, "USER": DefaultUser, "LOGNAME": DefaultUser, "PWD": dir}
	for k, v := range sandboxVars {
		env[k] = v
	}
	for k, v := range request {
		env[k] = v
	}
	return env
}

func clampSize(v uint32) uint16 {
	return uint16(min(v, 1000))
}
