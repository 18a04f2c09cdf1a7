// Package browser gives the sandbox its browser: the agent starts and supervises Xvfb, a VNC server and Chromium
// (restarting any that dies), proxies Chromium's DevTools discovery with URLs rewritten for the caller, relays CDP
// WebSockets (optionally answering Browser.close itself), bridges noVNC's WebSocket to the VNC server, and offers a
// few REST helpers on one persistent page.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Config says what to run. The zero value runs nothing; routes then answer not_supported.
type Config struct {
	// Browser starts Xvfb and Chromium (capability "browser").
	Browser bool
	// VNC starts Xvfb and x11vnc (capability "vnc", or "browser").
	VNC bool
	// Display is the X display; default ":99".
	Display string
	// Screen is Xvfb's screen geometry; default "1280x800x24".
	Screen string
	// CDPPort and VNCPort are the loopback ports of Chromium's DevTools and of x11vnc; defaults 9222 and 5900.
	CDPPort int
	VNCPort int
	// Chromium is the browser binary; default /usr/bin/chromium.
	Chromium string
	// Home is where Chromium's profile goes (a writable directory); default $HOME, else the temp dir.
	Home   string
	Env    []string
	Logger *slog.Logger
}

// Browser owns the supervised processes and serves the browser routes.
type Browser struct {
	cfg    Config
	http   *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	xvfb, vnc, chromium *supervised
	// frontend serves Chromium's bundled DevTools pages under /cdp/devtools/.
	frontend http.Handler

	page pageTarget
}

// New prepares a browser; Start runs it.
func New(cfg Config) *Browser {
	if cfg.Display == "" {
		cfg.Display = ":99"
	}
	if cfg.Screen == "" {
		cfg.Screen = "1280x800x24"
	}
	if cfg.CDPPort == 0 {
		cfg.CDPPort = 9222
	}
	if cfg.VNCPort == 0 {
		cfg.VNCPort = 5900
	}
	if cfg.Chromium == "" {
		cfg.Chromium = "/usr/bin/chromium"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Home == "" {
		cfg.Home = writableHome()
	}
	b := &Browser{cfg: cfg, http: &http.Client{Timeout: 10 * time.Second}}
	b.frontend = b.frontendProxy()
	env := append(append([]string{}, cfg.Env...), "DISPLAY="+cfg.Display)
	if cfg.Browser || cfg.VNC {
		b.xvfb = newSupervised(procSpec{
			name: "xvfb", env: env, prepare: b.clearDisplayLocks,
			argv: []string{"Xvfb", cfg.Display, "-screen", "0", cfg.Screen, "-nolisten", "tcp"},
		}, cfg.Logger)
	}
	if cfg.VNC {
		b.vnc = newSupervised(procSpec{
			name: "x11vnc", env: env, prepare: b.waitDisplay,
			argv: []string{"x11vnc", "-display", cfg.Display, "-forever", "-shared", "-nopw", "-localhost",
				"-rfbport", strconv.Itoa(cfg.VNCPort), "-quiet"},
		}, cfg.Logger)
	}
	if cfg.Browser {
		profile := filepath.Join(cfg.Home, ".config", "sandgate-chromium")
		w, h := screenSize(cfg.Screen)
		b.chromium = newSupervised(procSpec{
			name: "chromium", env: env,
			prepare: func(ctx context.Context) error {
				if err := b.waitDisplay(ctx); err != nil {
					return err
				}
				return clearProfileLocks(profile)
			},
			argv: []string{cfg.Chromium,
				// Chromium's own sandbox needs capabilities the container does not grant; the container is the sandbox.
				"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
				"--disable-background-networking", "--disable-component-update", "--disable-breakpad",
				"--disable-features=Translate,MediaRouter", "--password-store=basic", "--use-mock-keychain",
				"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=" + strconv.Itoa(cfg.CDPPort),
				"--user-data-dir=" + profile,
				"--window-position=0,0", fmt.Sprintf("--window-size=%d,%d", w, h),
				"about:blank"},
		}, cfg.Logger)
	}
	return b
}

// Enabled reports whether Chromium is configured.
func (b *Browser) Enabled() bool { return b.chromium != nil }

// vncEnabled reports whether a VNC server is configured.
func (b *Browser) vncEnabled() bool { return b.vnc != nil }

// Start launches the supervised processes in the background.
func (b *Browser) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for _, s := range []*supervised{b.xvfb, b.vnc, b.chromium} {
		if s == nil {
			continue
		}
		b.wg.Add(1)
		go func() { defer b.wg.Done(); s.run(ctx) }()
	}
}

// Stop ends the helpers' sessions and the supervised processes.
func (b *Browser) Stop() {
	b.page.close()
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
}

// Processes reports the supervised processes.
func (b *Browser) Processes() []Status {
	var out []Status
	for _, s := range []*supervised{b.xvfb, b.vnc, b.chromium} {
		if s != nil {
			out = append(out, s.status())
		}
	}
	return out
}

func (b *Browser) displaySocket() string {
	return filepath.Join("/tmp/.X11-unix", "X"+strings.TrimPrefix(b.cfg.Display, ":"))
}

// clearDisplayLocks removes what a killed Xvfb leaves behind; otherwise its successor refuses the display.
func (b *Browser) clearDisplayLocks(context.Context) error {
	n := strings.TrimPrefix(b.cfg.Display, ":")
	for _, p := range []string{"/tmp/.X" + n + "-lock", b.displaySocket()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing stale %s: %w", p, err)
		}
	}
	return nil
}

// waitDisplay waits until Xvfb accepts connections.
func (b *Browser) waitDisplay(ctx context.Context) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("unix", b.displaySocket(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("display %s is not up: %w", b.cfg.Display, err)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// clearProfileLocks removes Chromium's singleton files; after a crash they would make the next start hand over to a
// browser that no longer exists.
func clearProfileLocks(profile string) error {
	if err := os.MkdirAll(profile, 0o700); err != nil {
		return fmt.Errorf("creating chromium profile %s: %w", profile, err)
	}
	for _, name := range []string{"SingletonLock", "SingletonSocket", "SingletonCookie"} {
		if err := os.Remove(filepath.Join(profile, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", name, err)
		}
	}
	return nil
}

func writableHome() string {
	if h := os.Getenv("HOME"); h != "" {
		if err := os.MkdirAll(filepath.Join(h, ".config"), 0o700); err == nil {
			return h
		}
	}
	return os.TempDir()
}

func screenSize(screen string) (int, int) {
	parts := strings.Split(screen, "x")
	if len(parts) >= 2 {
		w, err1 := strconv.Atoi(parts[0])
		h, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil {
			return w, h
		}
	}
	return 1280, 800
}

// cdpBase is Chromium's DevTools HTTP endpoint.
func (b *Browser) cdpBase() string { return "http://127.0.0.1:" + strconv.Itoa(b.cfg.CDPPort) }

// readyWait bounds how long a request waits for a (re)starting Chromium before answering unavailable.
const readyWait = 20 * time.Second

// ready waits until Chromium answers /json/version and returns its body.
func (b *Browser) ready(ctx context.Context) (map[string]any, error) {
	if !b.Enabled() {
		return nil, agentapi.Errorf(agentapi.CodeNotSupported, "this sandbox has no browser (capability %q not set)", "browser")
	}
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	var last error
	for {
		var v map[string]any
		if last = b.getJSON(ctx, "/json/version", &v); last == nil {
			return v, nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			e := agentapi.Errorf(agentapi.CodeUnavailable, "chromium is not answering (starting or restarting): %v", last)
			e.Retryable = true
			return nil, e
		}
	}
}

func (b *Browser) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.cdpBase()+path, nil)
	if err != nil {
		return err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("chromium answered %s to %s: %s", resp.Status, path, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}
