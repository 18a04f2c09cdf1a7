package mcpapi

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Execution tools: code in a persistent kernel, a shell command, and a long command that reports progress.

// maxLongOutput bounds what run_long_command keeps of each stream: the head and the tail, the middle is cut.
const (
	longOutputHead = 16 << 10
	longOutputTail = 48 << 10
)

func (s *Server) addExecTools() {
	tool(s, &mcp.Tool{Name: "run_code", Description: "Run Python or JavaScript (Node.js) in the sandbox's persistent " +
		"kernel, like a notebook cell: variables, imports and functions stay defined for later calls. Returns stdout, " +
		"the value of the last expression and any error; matplotlib figures (plt.show() or a figure as the last " +
		"value) come back as PNG images."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in runCodeArgs) (*mcp.CallToolResult, error) {
			d, _ := timeout(in.TimeoutSeconds, defaultTimeoutSec, maxTimeoutSec)
			res, err := c.ops.RunKernel(ctx, c.p, in.SandboxID, in.language(), in.Code, d, service.ExecMeta{})
			if err != nil {
				return nil, err
			}
			var images []mcp.Content
			for _, img := range res.Images {
				png, err := base64.StdEncoding.DecodeString(img)
				if err != nil {
					return nil, fmt.Errorf("decoding an image of the kernel: %w", err)
				}
				images = append(images, &mcp.ImageContent{Data: png, MIMEType: "image/png"})
			}
			out, err := jsonResult(map[string]any{
				"success": res.Success, "output": res.Text, "error": res.Error,
				"execution_count": res.ExecutionCount, "images": len(images),
			}, images...)
			if err == nil && !res.Success {
				out.IsError = true // the code raised: the model should see a failed call, with the traceback
			}
			return out, err
		})

	tool(s, &mcp.Tool{Name: "run_command", Description: "Run a shell command (bash) in the sandbox and wait for it " +
		"to finish. Returns exit_code, stdout and stderr. The command is killed at timeout_seconds (default 30, at " +
		"most 300); use run_long_command for builds, installs and anything slower."},
		func(ctx context.Context, c caller, _ *mcp.CallToolRequest, in commandArgs) (*mcp.CallToolResult, error) {
			res, err := c.ops.RunShell(ctx, c.p, in.SandboxID, in.params(maxTimeoutSec), service.ExecMeta{})
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{
				"exit_code": res.ExitCode, "stdout": res.Stdout, "stderr": res.Error, "timed_out": res.TimedOut,
				"duration_ms": res.Elapsed.Milliseconds(),
			})
		})

	tool(s, &mcp.Tool{Name: "run_long_command", Description: "Run a slow shell command (a build, a package install, " +
		"a test suite) and wait for it, sending progress notifications with its latest output line while it runs. " +
		"The command is killed at timeout_seconds (default 30, at most 86400). Returns exit_code and the head and " +
		"tail of stdout and stderr."},
		func(ctx context.Context, c caller, req *mcp.CallToolRequest, in longCommandArgs) (*mcp.CallToolResult, error) {
			return s.runLong(ctx, c, req, in)
		})
}

// capture keeps the head and the tail of a stream.
type capture struct {
	head, tail []byte
	total      int64
}

func (c *capture) write(b []byte) {
	c.total += int64(len(b))
	if room := longOutputHead - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	c.tail = append(c.tail, b...)
	if len(c.tail) > longOutputTail {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-longOutputTail:]...)
	}
}

func (c *capture) String() string {
	kept := int64(len(c.head) + len(c.tail))
	if kept == c.total {
		return string(c.head) + string(c.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes cut ...]\n%s", c.head, c.total-kept, c.tail)
}

func (s *Server) runLong(ctx context.Context, c caller, req *mcp.CallToolRequest, in longCommandArgs) (*mcp.CallToolResult, error) {
	body, err := c.ops.StreamShell(ctx, c.p, in.SandboxID, commandArgs(in).params(maxLongTimeoutSec))
	if err != nil {
		return nil, err
	}
	defer body.Close()
	token := req.Params.GetProgressToken()
	var (
		stdout, stderr capture
		lastLine       string
		lastSent       time.Time
		final          *agentapi.ExecResult
		events         float64
	)
	start := time.Now()
	r := bufio.NewReader(body)
	for final == nil {
		ev, err := agentapi.ReadSSE(r)
		if err != nil {
			return nil, &service.Error{Code: service.CodeShipError, Message: fmt.Sprintf("the command's output stream broke after %s: %v", time.Since(start).Round(time.Second), err)}
		}
		switch ev.Event {
		case agentapi.EventStdout, agentapi.EventStderr:
			if ev.Chunk == nil {
				continue
			}
			b, err := ev.Chunk.Bytes()
			if err != nil {
				continue
			}
			if ev.Event == agentapi.EventStdout {
				stdout.write(b)
			} else {
				stderr.write(b)
			}
			if l := lastNonEmptyLine(string(b)); l != "" {
				lastLine = l
			}
			events++
			if token != nil && time.Since(lastSent) >= s.opts.ProgressEvery {
				lastSent = time.Now()
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: events,
					Message: fmt.Sprintf("running for %s: %s", time.Since(start).Round(time.Second), truncate(lastLine, 200)),
				})
			}
		case agentapi.EventEnd:
			final = ev.Process
			if final == nil {
				final = &agentapi.ExecResult{}
			}
		}
	}
	exit := -1
	if final.ExitCode != nil {
		exit = *final.ExitCode
	}
	out := map[string]any{
		"exit_code": exit, "status": final.Status, "stdout": stdout.String(), "stderr": stderr.String(),
		"duration_ms": time.Since(start).Milliseconds(),
	}
	if final.Signal != "" {
		out["signal"] = final.Signal
	}
	return jsonResult(out)
}

func lastNonEmptyLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\r\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
