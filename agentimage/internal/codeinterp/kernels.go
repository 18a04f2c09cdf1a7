package codeinterp

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/linekernel"
	"github.com/sandgate/sandgate/agentimage/internal/nodekernel"
	"github.com/sandgate/sandgate/agentimage/internal/pykernel"
	"github.com/sandgate/sandgate/agentimage/internal/rkernel"
)

// envSetupTimeout bounds the small cells that set and restore an execution's env_vars.
const envSetupTimeout = 10 * time.Second

// runner is one context's kernel: the agent's own persistent kernels (pykernel, nodekernel, rkernel), one process
// per context.
type runner interface {
	// run executes code with env set for this execution only; out receives output as it is printed (Python, Node;
	// R's stdout), and the outcome carries only what was not streamed.
	run(ctx context.Context, code string, env map[string]string, out pykernel.Output) outcome
	restart(ctx context.Context) error
	close()
}

// outcome is what an execution produced, in E2B's terms.
type outcome struct {
	// stdout and stderr are output the kernel did not stream.
	stdout, stderr string
	results        []map[string]any
	err            *errorLine
}

// mimeKeys maps Jupyter MIME types onto the keys of E2B's result line (reference/e2b.md §5.1).
var mimeKeys = map[string]string{
	"text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg", "image/png": "png",
	"image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
	"application/javascript": "javascript",
}

// fromKernel turns a kernel's result into E2B's: figures are display results, the trailing value is the main one.
func fromKernel(res agentapi.KernelExecResult, formats map[string]any, tracebackSep string) outcome {
	var o outcome
	for _, png := range res.Images {
		o.results = append(o.results, map[string]any{"type": lineResult, "png": png, "is_main_result": false})
	}
	if res.Result != nil {
		main := map[string]any{"type": lineResult, "text": *res.Result, "is_main_result": true}
		for mime, v := range formats {
			if key, ok := mimeKeys[mime]; ok {
				main[key] = v
			}
		}
		o.results = append(o.results, main)
	}
	if res.Error != nil {
		o.err = &errorLine{Type: lineError, Name: res.Error.EName, Value: res.Error.EValue, Traceback: strings.Join(res.Error.Traceback, tracebackSep)}
	}
	return o
}

// failure is the outcome of an execution the kernel could not run (it did not start, or died).
func failure(err error) outcome {
	name := "KernelError"
	var e *agentapi.Error
	if errors.As(err, &e) && e.Code == agentapi.CodeKernelDied {
		name = "KernelDied"
	}
	msg := err.Error()
	return outcome{err: &errorLine{Type: lineError, Name: name, Value: msg, Traceback: msg}}
}

// pythonRunner is a context on pykernel: output streams as printed.
type pythonRunner struct {
	k       *pykernel.Kernel
	timeout time.Duration
}

func (p *pythonRunner) run(ctx context.Context, code string, env map[string]string, out pykernel.Output) outcome {
	if len(env) > 0 {
		setup, restore := pythonEnvCells(env)
		if o, ok := p.quiet(ctx, setup); !ok {
			return o
		}
		defer p.quiet(context.WithoutCancel(ctx), restore)
	}
	res, err := p.k.ExecStream(ctx, code, p.timeout, out)
	if err != nil {
		return failure(err)
	}
	// Streamed already: the outcome carries only results and the error.
	return fromKernel(agentapi.KernelExecResult{Result: res.Result, Error: res.Error, Images: res.Images}, res.Formats, "")
}

// quiet runs one of the agent's own cells; a failure becomes the execution's error.
func (p *pythonRunner) quiet(ctx context.Context, code string) (outcome, bool) {
	ctx, cancel := context.WithTimeout(ctx, envSetupTimeout)
	defer cancel()
	res, err := p.k.Exec(ctx, code, envSetupTimeout)
	if err != nil {
		return failure(err), false
	}
	if !res.Success {
		return fromKernel(*res, nil, ""), false
	}
	return outcome{}, true
}

func (p *pythonRunner) restart(ctx context.Context) error {
	_, err := p.k.Restart(ctx)
	return err
}

func (p *pythonRunner) close() { p.k.Close() }

// lineRunner is a context on the Node or R kernel: Node streams its output, R its stdout; the kernel hands out the
// rest with the result.
type lineRunner struct {
	k       *linekernel.Kernel
	timeout time.Duration
	// envCells builds the cells that set and restore an execution's variables.
	envCells     func(map[string]string) (setup, restore string)
	tracebackSep string
}

func (l *lineRunner) run(ctx context.Context, code string, env map[string]string, out pykernel.Output) outcome {
	if len(env) > 0 {
		setup, restore := l.envCells(env)
		if o, ok := l.quiet(ctx, setup); !ok {
			return o
		}
		defer l.quiet(context.WithoutCancel(ctx), restore)
	}
	res, err := l.k.ExecStream(ctx, code, l.timeout, linekernel.Output(out))
	if err != nil {
		return failure(err)
	}
	// ExecStream handed out all of res.Stdout and res.Stderr.
	return fromKernel(res, nil, l.tracebackSep)
}

func (l *lineRunner) quiet(ctx context.Context, code string) (outcome, bool) {
	res, err := l.k.Exec(ctx, code, envSetupTimeout)
	if err != nil {
		return failure(err), false
	}
	if !res.Success {
		return fromKernel(res, nil, l.tracebackSep), false
	}
	return outcome{}, true
}

func (l *lineRunner) restart(context.Context) error {
	l.k.Restart()
	return nil
}

func (l *lineRunner) close() { l.k.Close() }

// newRunner starts nothing: each kernel starts on its context's first execution.
func (s *Service) newRunner(lang, dir string, env []string) runner {
	switch lang {
	case LangPython:
		k := pykernel.New(pykernel.Config{Python: s.cfg.Python, Dir: dir, Env: env, MaxOutput: s.cfg.MaxOutput, Logger: s.cfg.Logger})
		return &pythonRunner{k: k, timeout: s.cfg.PythonTimeout}
	case LangJavaScript, LangTypeScript:
		k := nodekernel.New(nodekernel.Config{Bin: s.cfg.Node, Dir: dir, Env: env, Logger: s.cfg.Logger})
		return &lineRunner{k: k, timeout: linekernel.MaxTimeout, envCells: jsEnvCells, tracebackSep: "\n"}
	default: // LangR
		k := rkernel.New(rkernel.Config{Bin: s.cfg.Rscript, Dir: dir, Env: env, Logger: s.cfg.Logger})
		return &lineRunner{k: k, timeout: linekernel.MaxTimeout, envCells: rEnvCells, tracebackSep: "\n"}
	}
}

// The env cells: they save what the variables were, set them, and put them back after the execution, in the
// kernel's own process (so the cell's subprocesses inherit them too). JSON of a string map is a valid Python and
// JavaScript literal.
func pythonEnvCells(env map[string]string) (setup, restore string) {
	lit := jsonLiteral(env)
	setup = "(lambda o, e: (setattr(__import__('sys'), '_sandgate_saved_env', {k: o.environ.get(k) for k in e}), o.environ.update(e)))(__import__('os'), " + lit + ")\nNone"
	restore = "(lambda o, s: [o.environ.pop(k, None) if v is None else o.environ.__setitem__(k, v) for k, v in s.items()])(__import__('os'), __import__('sys').__dict__.pop('_sandgate_saved_env', {}))\nNone"
	return setup, restore
}

func jsEnvCells(env map[string]string) (setup, restore string) {
	lit := jsonLiteral(env)
	setup = "(() => { const e = " + lit + "; globalThis.__sandgateSavedEnv = Object.fromEntries(Object.keys(e).map((k) => [k, process.env[k]])); Object.assign(process.env, e); })(); undefined"
	restore = "(() => { const s = globalThis.__sandgateSavedEnv || {}; for (const [k, v] of Object.entries(s)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; } delete globalThis.__sandgateSavedEnv; })(); undefined"
	return setup, restore
}

func rEnvCells(env map[string]string) (setup, restore string) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var names, values []string
	for _, k := range keys {
		names = append(names, strconv.Quote(k))
		values = append(values, strconv.Quote(env[k]))
	}
	vec := "c(" + strings.Join(names, ", ") + ")"
	setup = "invisible(local({ n <- " + vec + "; v <- c(" + strings.Join(values, ", ") + "); assign('.sandgate_saved_env', Sys.getenv(n, unset = NA, names = TRUE), envir = globalenv()); do.call(Sys.setenv, as.list(setNames(v, n))) }))"
	restore = "invisible(local({ s <- get0('.sandgate_saved_env', envir = globalenv(), ifnotfound = character()); for (n in names(s)) { if (is.na(s[[n]])) Sys.unsetenv(n) else do.call(Sys.setenv, as.list(setNames(s[[n]], n))) }; if (exists('.sandgate_saved_env', envir = globalenv())) rm('.sandgate_saved_env', envir = globalenv()) }))"
	return setup, restore
}

func jsonLiteral(env map[string]string) string {
	b, _ := json.Marshal(env) // a map of strings always encodes
	return string(b)
}
