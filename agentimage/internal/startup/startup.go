// Package startup runs what a profile asks for before the agent reports ready: package-mirror files, dependencies,
// init commands, then the user services. Until it is done GET /health answers 503 {"status":"starting"}; if a step
// fails it answers 503 {"status":"failed","error":...} for good, so the gateway marks the sandbox failed with the
// installer's or the script's own message. Every step's output is kept for GET /v1/init/log.
package startup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
	"github.com/sandgate/sandgate/agentimage/internal/mirrors"
	"github.com/sandgate/sandgate/agentimage/internal/services"
)

const (
	stepTimeout   = 10 * time.Minute
	outputLimit   = 256 << 10
	portWait      = 15 * time.Second
	errorTailLine = 8
)

// Config is the customisation the gateway passed in the environment.
type Config struct {
	Home, Workspace string
	Init            []string
	Services        []agentapi.ServiceSpec
	Dependencies    agentapi.Dependencies
	Mirrors         agentapi.Mirrors
}

// Paths are where dependencies go: in the workspace, so they survive a stop (the root filesystem is read-only and
// HOME is a tmpfs).
type Paths struct {
	Python string // pip --target
	Node   string // npm --prefix; modules in Node/node_modules
	R      string // the R library dependencies.r installs into (R_LIBS_USER), as the r image sets it
}

// PathsFor returns the dependency directories under workspace.
func PathsFor(workspace string) Paths {
	base := filepath.Join(workspace, ".sandgate")
	return Paths{Python: filepath.Join(base, "python"), Node: filepath.Join(base, "node"), R: filepath.Join(workspace, ".r-library")}
}

// Environ is the environment every process of the sandbox should see so the dependencies import: PYTHONPATH,
// NODE_PATH, R_LIBS_USER and PATH extended (existing values kept after ours, unless they are ours).
func (p Paths) Environ() map[string]string {
	join := func(name string, first ...string) string {
		parts := first
		if v := os.Getenv(name); v != "" && v != strings.Join(first, string(os.PathListSeparator)) {
			parts = append(parts, v)
		}
		return strings.Join(parts, string(os.PathListSeparator))
	}
	return map[string]string{
		"PYTHONPATH":  join("PYTHONPATH", p.Python),
		"NODE_PATH":   join("NODE_PATH", filepath.Join(p.Node, "node_modules")),
		"R_LIBS_USER": join("R_LIBS_USER", p.R),
		"PATH":        join("PATH", filepath.Join(p.Python, "bin"), filepath.Join(p.Node, "node_modules", ".bin")),
	}
}

// ConfigFromEnv reads SANDGATE_INIT, SANDGATE_SERVICES, SANDGATE_DEPENDENCIES and SANDGATE_MIRRORS (falling back
// to FastGPT's AGENT_SANDBOX_* mirror variables) and validates them.
func ConfigFromEnv(home, workspace string) (Config, error) {
	c := Config{Home: home, Workspace: workspace}
	for _, v := range []struct {
		name string
		into any
	}{
		{agentapi.EnvInit, &c.Init},
		{agentapi.EnvServices, &c.Services},
		{agentapi.EnvDependencies, &c.Dependencies},
		{agentapi.EnvMirrors, &c.Mirrors},
	} {
		raw := strings.TrimSpace(os.Getenv(v.name))
		if raw == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v.into); err != nil {
			return c, fmt.Errorf("%s is not valid: %w", v.name, err)
		}
	}
	if c.Mirrors == (agentapi.Mirrors{}) {
		c.Mirrors = mirrors.FromEnv()
	}
	if err := mirrors.Validate(c.Mirrors); err != nil {
		return c, fmt.Errorf("%s: %w", agentapi.EnvMirrors, err)
	}
	if err := c.Dependencies.Validate(); err != nil {
		return c, err
	}
	svcs, err := services.Validate(c.Services)
	if err != nil {
		return c, err
	}
	c.Services = svcs
	for i, cmd := range c.Init {
		if strings.TrimSpace(cmd) == "" {
			return c, fmt.Errorf("%s: command %d is empty", agentapi.EnvInit, i)
		}
	}
	return c, nil
}

// Startup is the state of the start-up sequence.
type Startup struct {
	cfg    Config
	paths  Paths
	logger *slog.Logger

	mu     sync.Mutex
	status string
	err    string
	steps  []agentapi.InitStep
	sup    *services.Supervisor
}

// New returns a Startup in state starting; a configuration error makes it failed from the start.
func New(cfg Config, cfgErr error, logger *slog.Logger) *Startup {
	s := &Startup{cfg: cfg, paths: PathsFor(cfg.Workspace), logger: logger, status: agentapi.StartupStarting, steps: []agentapi.InitStep{}}
	if cfgErr != nil {
		s.fail(agentapi.InitStep{Name: "configuration", ExitCode: -1, Error: cfgErr.Error()}, cfgErr.Error())
	}
	return s
}

// Paths are the dependency directories.
func (s *Startup) Paths() Paths { return s.paths }

// Run performs the steps in order and, unless one failed, starts the services and reports ready. The services
// stop when ctx ends.
func (s *Startup) Run(ctx context.Context) {
	if s.Status() == agentapi.StartupFailed {
		return
	}
	began := time.Now()
	rep := mirrors.Apply(s.cfg.Home, s.cfg.Mirrors, mirrors.Options{})
	if s.cfg.Mirrors != (agentapi.Mirrors{}) {
		out := fmt.Sprintf("files: %s\napt: %s\n", strings.Join(rep.Files, " "), rep.Apt)
		for _, e := range rep.Errors {
			out += "warning: " + e + "\n"
		}
		s.record(agentapi.InitStep{Name: "mirrors", Output: out, DurationMS: time.Since(began).Milliseconds()})
	}
	if len(s.cfg.Dependencies.Apt) > 0 {
		s.fail(agentapi.InitStep{Name: "apt dependencies", ExitCode: -1, Error: ErrAptAtRuntime}, ErrAptAtRuntime)
		return
	}
	if len(s.cfg.Dependencies.Python) > 0 {
		pkgs := pythonRequirements(s.cfg.Dependencies.Python)
		args := append([]string{"-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-warn-script-location",
			"--upgrade", "--target", s.paths.Python}, pkgs...)
		if !s.install(ctx, "python dependencies", s.paths.Python, pkgs, "", "python3", args...) {
			return
		}
	}
	if len(s.cfg.Dependencies.Node) > 0 {
		pkgs := nodePackages(s.cfg.Dependencies.Node)
		args := append([]string{"install", "--no-audit", "--no-fund", "--no-update-notifier", "--prefix", s.paths.Node}, pkgs...)
		if !s.install(ctx, "node dependencies", s.paths.Node, pkgs, "", "npm", args...) {
			return
		}
	}
	if len(s.cfg.Dependencies.R) > 0 {
		// Packages the image already has (a profile image with Debian's r-cran-*) are only checked; the rest
		// install from the profile's repository into the workspace library.
		repo := s.cfg.Mirrors.CRANMirror
		if repo == "" {
			repo = DefaultCRANMirror
		}
		pairs := rPackages(s.cfg.Dependencies.R)
		args := append([]string{"--no-save", "--no-restore", "--no-site-file", "--no-init-file", "-e", rProgram, s.paths.R, repo}, pairs...)
		var named []string // R6>=2.5, jsonlite: for the messages and the marker
		for i := 0; i < len(pairs); i += 2 {
			named = append(named, pairs[i]+pairs[i+1])
		}
		shown := "Rscript rdeps.R " + s.paths.R + " " + repo + " " + strings.Join(named, " ")
		if !s.install(ctx, "r dependencies", s.paths.R, named, shown, "Rscript", args...) {
			return
		}
	}
	for i, cmd := range s.cfg.Init {
		step := s.run(ctx, fmt.Sprintf("init %d", i+1), cmd, "bash", "-c", cmd)
		if step.ExitCode != 0 || step.Error != "" {
			s.fail(step, fmt.Sprintf("init command %d (%s) failed: %s", i+1, truncate(cmd, 80), describeFailure(step)))
			return
		}
		s.record(step)
	}
	if len(s.cfg.Services) > 0 {
		sup := services.New(s.cfg.Services, s.cfg.Workspace, s.logger.With("component", "services"))
		sup.Start(ctx)
		s.mu.Lock()
		s.sup = sup
		s.mu.Unlock()
		s.waitPorts(ctx)
	}
	s.mu.Lock()
	s.status = agentapi.StartupReady
	s.mu.Unlock()
	s.logger.Info("sandbox customisation done", "duration_ms", time.Since(began).Milliseconds())
}

// install runs an installer unless the same packages are already in dir (a marker holds their hash). shown is the
// command as the init log shows it ("" is bin and args).
func (s *Startup) install(ctx context.Context, name, dir string, pkgs []string, shown, bin string, args ...string) bool {
	marker := filepath.Join(dir, ".sandgate-installed")
	want := depsHash(name, pkgs)
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == want {
		s.record(agentapi.InitStep{Name: name, Command: strings.Join(pkgs, " "), Output: "already installed in " + dir + "\n"})
		return true
	}
	if _, err := exec.LookPath(bin); err != nil {
		msg := fmt.Sprintf("installing %s needs %s, which this image does not have", name, bin)
		switch bin {
		case "npm":
			msg += " (use the sandgate/sandbox:node image)"
		case "Rscript":
			msg += " (use the sandgate/sandbox:r image)"
		}
		s.fail(agentapi.InitStep{Name: name, Command: strings.Join(pkgs, " "), ExitCode: -1, Error: msg}, msg)
		return false
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		msg := fmt.Sprintf("creating %s: %v", dir, err)
		s.fail(agentapi.InitStep{Name: name, ExitCode: -1, Error: msg}, msg)
		return false
	}
	if shown == "" {
		shown = bin + " " + strings.Join(args, " ")
	}
	step := s.run(ctx, name, shown, bin, args...)
	if step.ExitCode != 0 || step.Error != "" {
		s.fail(step, fmt.Sprintf("installing %s (%s) failed: %s", name, strings.Join(pkgs, " "), describeFailure(step)))
		return false
	}
	if err := os.WriteFile(marker, []byte(want+"\n"), 0o644); err != nil {
		s.logger.Warn("dependency marker not written", "path", marker, "error", err)
	}
	s.record(step)
	return true
}

// run executes one command in the workspace with the sandbox's environment, keeping its combined output.
func (s *Startup) run(ctx context.Context, name, shown, bin string, args ...string) agentapi.InitStep {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.cfg.Workspace
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	step := agentapi.InitStep{Name: name, Command: shown, Output: out.String(), DurationMS: time.Since(began).Milliseconds()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		step.ExitCode, step.Error = -1, fmt.Sprintf("timed out after %s", stepTimeout)
	case errors.As(err, &ee):
		step.ExitCode = ee.ExitCode()
	default:
		step.ExitCode, step.Error = -1, err.Error()
	}
	return step
}

// waitPorts gives services with a port a moment to listen, so /app works as soon as the sandbox is ready. A service
// that does not listen in time is not a failure: it shows in GET /v1/services.
func (s *Startup) waitPorts(ctx context.Context) {
	deadline := time.Now().Add(portWait)
	for _, svc := range s.cfg.Services {
		if svc.Port == 0 {
			continue
		}
		for time.Now().Before(deadline) && ctx.Err() == nil {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", svc.Port), 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (s *Startup) record(step agentapi.InitStep) {
	s.mu.Lock()
	s.steps = append(s.steps, step)
	s.mu.Unlock()
}

func (s *Startup) fail(step agentapi.InitStep, msg string) {
	s.mu.Lock()
	s.steps = append(s.steps, step)
	s.status, s.err = agentapi.StartupFailed, msg
	s.mu.Unlock()
	s.logger.Error("sandbox start-up failed", "error", msg)
}

// Status is starting, ok or failed.
func (s *Startup) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Log is GET /v1/init/log.
func (s *Startup) Log() agentapi.InitLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return agentapi.InitLog{Status: s.status, Error: s.err, Steps: append([]agentapi.InitStep{}, s.steps...)}
}

// Services lists the supervised services (empty before they start).
func (s *Startup) Services() []agentapi.ServiceStatus {
	s.mu.Lock()
	sup := s.sup
	s.mu.Unlock()
	if sup == nil {
		out := make([]agentapi.ServiceStatus, 0, len(s.cfg.Services))
		for _, spec := range s.cfg.Services {
			out = append(out, agentapi.ServiceStatus{Name: spec.Name, State: "pending", Port: spec.Port, LastLog: []string{}})
		}
		return out
	}
	return sup.Status()
}

// GateHealth answers GET /health with 503 while starting or failed, and lets next answer once ready.
func (s *Startup) GateHealth(next http.Handler, version string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.mu.Lock()
			status, msg := s.status, s.err
			s.mu.Unlock()
			if status != agentapi.StartupReady {
				w.Header().Set("Retry-After", "1")
				agentapi.WriteJSON(w, http.StatusServiceUnavailable, agentapi.Health{Status: status, Version: version, Error: msg})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func describeFailure(step agentapi.InitStep) string {
	if step.Error != "" {
		return step.Error
	}
	return fmt.Sprintf("exit %d: %s", step.ExitCode, tail(step.Output, errorTailLine))
}

// tail is the last n non-empty lines of s, where installers put the reason.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// limitedBuffer keeps the last outputLimit bytes and the fact that more came.
type limitedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - outputLimit; over > 0 {
		// Keep the end: installers and scripts say what went wrong last.
		b.truncated = true
		rest := append([]byte(nil), b.buf.Bytes()[over:]...)
		b.buf.Reset()
		b.buf.Write(rest)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.truncated {
		return "[earlier output dropped]\n" + b.buf.String()
	}
	return b.buf.String()
}
