package mcptools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/process"
	"github.com/sandgate/sandgate/agentimage/internal/ring"
)

// Output budget of one bash result: the head and the tail of each stream are kept, the middle is cut.
const (
	outputHead = 8 << 10
	outputTail = 24 << 10
)

// Timeouts of the bash tool.
const (
	bashDefaultTimeout = 2 * time.Minute
	bashMaxTimeout     = 30 * time.Minute
)

type bashIn struct {
	Command   string            `json:"command" jsonschema:"the command, run by /bin/bash -c"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"working directory relative to the workspace (default: the workspace root)"`
	TimeoutMS int64             `json:"timeout_ms,omitempty" jsonschema:"hard limit in milliseconds (default 120000, at most 1800000); the process group is killed when it passes"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
}

type bashOut struct {
	ProcessID  string `json:"process_id"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	Signal     string `json:"signal,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	Truncated  bool   `json:"truncated"`
}

type readIn struct {
	Path   string `json:"path" jsonschema:"file path relative to the workspace"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to read, 1-based (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"number of lines (default 2000)"`
}

type writeIn struct {
	Path    string `json:"path" jsonschema:"file path relative to the workspace; parents are created"`
	Content string `json:"content" jsonschema:"the whole new content (may be empty)"`
}

type editIn struct {
	Path       string `json:"path" jsonschema:"file path relative to the workspace"`
	OldString  string `json:"old_string" jsonschema:"exact text to replace; must occur once unless replace_all"`
	NewString  string `json:"new_string" jsonschema:"replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence"`
}

type globIn struct {
	Pattern string `json:"pattern" jsonschema:"glob such as **/*.go (** matches any number of directories)"`
	Path    string `json:"path,omitempty" jsonschema:"directory to search from (default: the workspace root)"`
}

type grepIn struct {
	Pattern         string `json:"pattern" jsonschema:"ripgrep regular expression"`
	Path            string `json:"path,omitempty" jsonschema:"file or directory to search (default: the workspace root)"`
	Glob            string `json:"glob,omitempty" jsonschema:"only files matching this glob, e.g. *.py"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty"`
	ContextLines    int    `json:"context_lines,omitempty" jsonschema:"lines of context around each match"`
	Limit           int    `json:"limit,omitempty" jsonschema:"most matches returned (default 500)"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (s *Server) addCoreTools() {
	Add(s, &mcp.Tool{Name: "bash", Description: "Run a shell command in the sandbox's workspace and return its exit code, stdout and stderr. " +
		"Long output keeps its head and tail; the full output stays available at the agent's /v1/processes/{process_id}. " +
		"Default timeout 2 minutes (timeout_ms, at most 30 minutes); progress notifications are sent while it runs."}, s.bash)
	Add(s, &mcp.Tool{Name: "read", Description: "Read a text file with line numbers (offset/limit in lines, default the first 2000 lines)."}, s.read)
	Add(s, &mcp.Tool{Name: "write", Description: "Write a file atomically, replacing its content; parent directories are created."}, s.write)
	Add(s, &mcp.Tool{Name: "edit", Description: "Replace exact text in a file. old_string must occur exactly once unless replace_all is set."}, s.edit)
	Add(s, &mcp.Tool{Name: "glob", Description: "Find paths matching a glob pattern (** for any depth), sorted."}, s.glob)
	Add(s, &mcp.Tool{Name: "grep", Description: "Search file contents with ripgrep; returns path:line:text for each match."}, s.grep)
}

func (s *Server) bash(ctx context.Context, req *mcp.CallToolRequest, in bashIn) (*mcp.CallToolResult, bashOut, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, bashOut{}, fmt.Errorf("command is required")
	}
	timeout := bashDefaultTimeout
	if in.TimeoutMS > 0 {
		timeout = min(time.Duration(in.TimeoutMS)*time.Millisecond, bashMaxTimeout)
	}
	dir, err := s.deps.Files.Root().Resolve(in.Cwd)
	if err != nil {
		return nil, bashOut{}, err
	}
	p, err := s.deps.Procs.Start(process.Spec{Cmd: in.Command, Dir: dir, Env: in.Env, Timeout: timeout, Tag: "mcp"})
	if err != nil {
		return nil, bashOut{}, err
	}
	token := req.Params.GetProgressToken()
	tick := time.NewTicker(s.deps.ProgressEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-p.Done():
			break wait
		case <-ctx.Done():
			// The caller gave up on this call; nobody will read the result, so do not leave the command running.
			p.Kill()
			return nil, bashOut{}, ctx.Err()
		case <-tick.C:
			if token != nil {
				_, outN, _ := p.Stdout().Bounds()
				_, errN, _ := p.Stderr().Bounds()
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      time.Since(p.Started()).Seconds(),
					Message:       fmt.Sprintf("running for %s, %d bytes of output so far (process %s)", time.Since(p.Started()).Round(time.Second), outN+errN, p.ID),
				})
			}
		}
	}
	res := p.Result(0)
	out := bashOut{ProcessID: p.ID, Status: res.Status, ExitCode: res.ExitCode, Signal: res.Signal, DurationMS: res.DurationMS}
	var b strings.Builder
	stdout, cutOut := headTail(p.Stdout())
	stderr, cutErr := headTail(p.Stderr())
	out.Truncated = cutOut || cutErr
	b.WriteString(stdout)
	if stderr != "" {
		if stdout != "" && !strings.HasSuffix(stdout, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	switch res.Status {
	case agentapi.StatusTimedOut:
		fmt.Fprintf(&b, "[timed out after %s; the process group was killed]\n", timeout)
	case agentapi.StatusKilled:
		b.WriteString("[killed]\n")
	}
	code := -1
	if res.ExitCode != nil {
		code = *res.ExitCode
	}
	fmt.Fprintf(&b, "[exit code %d", code)
	if res.Signal != "" {
		fmt.Fprintf(&b, ", signal %s", res.Signal)
	}
	fmt.Fprintf(&b, ", %d ms, process %s]", res.DurationMS, p.ID)
	if out.Truncated {
		fmt.Fprintf(&b, "\n[output was cut; the last %d KiB per stream stay at GET /v1/processes/%s for 10 minutes]", agentapi.RingBytes>>10, p.ID)
	}
	return text(b.String()), out, nil
}

// headTail renders a stream, keeping its head and tail when it is long.
func headTail(r *ring.Ring) (string, bool) {
	oldest, end, _ := r.Bounds()
	if end <= outputHead+outputTail {
		b, _ := r.Tail(int(end))
		return strings.ToValidUTF8(string(b), "\uFFFD"), false
	}
	var head []byte
	if oldest == 0 {
		head, _, _, _ = r.ReadAt(0, outputHead)
	}
	tail, start := r.Tail(outputTail)
	omitted := start - int64(len(head))
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n… [%d bytes omitted] …\n", omitted) +
		strings.ToValidUTF8(string(tail), "\uFFFD"), true
}

func (s *Server) read(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
	res, err := s.deps.Files.Read(agentapi.ReadRequest{Path: in.Path, Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return nil, nil, err
	}
	var b strings.Builder
	lines := strings.Split(strings.TrimSuffix(res.Content, "\n"), "\n")
	if res.EndLine >= res.StartLine {
		for i, l := range lines {
			fmt.Fprintf(&b, "%6d\t%s\n", res.StartLine+i, l)
		}
	} else {
		b.WriteString("(no lines in this range)\n")
	}
	if res.Hint != "" {
		fmt.Fprintf(&b, "[%s]\n", res.Hint)
	}
	return text(b.String()), nil, nil
}

func (s *Server) write(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
	res, err := s.deps.Files.Write(ctx, agentapi.WriteRequest{Path: in.Path, Content: in.Content})
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("wrote %d bytes to %s", res.Size, res.Path)), nil, nil
}

func (s *Server) edit(ctx context.Context, _ *mcp.CallToolRequest, in editIn) (*mcp.CallToolResult, any, error) {
	res, err := s.deps.Files.Edit(ctx, agentapi.EditRequest{Path: in.Path, Old: in.OldString, New: in.NewString, ReplaceAll: in.ReplaceAll})
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("replaced %d occurrence(s) in %s", res.Replacements, res.Path)), nil, nil
}

func (s *Server) glob(ctx context.Context, _ *mcp.CallToolRequest, in globIn) (*mcp.CallToolResult, any, error) {
	res, err := s.deps.Files.Glob(ctx, agentapi.GlobRequest{Pattern: in.Pattern, Path: in.Path})
	if err != nil {
		return nil, nil, err
	}
	if len(res.Paths) == 0 {
		return text("no matches"), nil, nil
	}
	out := strings.Join(res.Paths, "\n")
	if res.Truncated {
		out += "\n[more matches left out; narrow the pattern]"
	}
	return text(out), nil, nil
}

func (s *Server) grep(ctx context.Context, _ *mcp.CallToolRequest, in grepIn) (*mcp.CallToolResult, any, error) {
	res, err := s.deps.Files.Grep(ctx, agentapi.GrepRequest{Pattern: in.Pattern, Path: in.Path, Glob: in.Glob,
		CaseInsensitive: in.CaseInsensitive, ContextLines: in.ContextLines, Limit: in.Limit})
	if err != nil {
		return nil, nil, err
	}
	if len(res.Matches) == 0 {
		return text("no matches"), nil, nil
	}
	var b strings.Builder
	for _, m := range res.Matches {
		sep := ":"
		if m.Context {
			sep = "-"
		}
		fmt.Fprintf(&b, "%s%s%d%s%s\n", m.Path, sep, m.Line, sep, m.Text)
	}
	if res.Truncated {
		b.WriteString("[more matches left out; narrow the pattern or raise limit]\n")
	}
	return text(b.String()), nil, nil
}
