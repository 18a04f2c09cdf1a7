package fastgpt

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Defaults of fastgpt-agent-sandbox-proxy, kept so a deployment that sets nothing behaves as the original.
const (
	DefaultAppURL          = "http://localhost:3000"
	DefaultRequestTimeout  = 10 * time.Second
	DefaultAddressCacheTTL = 30 * time.Second
	// MinSecretBytes is the shortest proxy secret the original accepts (it panics below it).
	MinSecretBytes = 32

	defaultMaxMessageBytes = 64 << 20
	defaultMaxFrameBytes   = 16 << 20
	previewCacheEntries    = 2000
)

// Routes selects which of the proxy's routes a Proxy serves; /health is always served.
type Routes int

// The route sets: the original serves everything on PORT, or splits WebSockets and preview across PORT and
// PREVIEW_PORT.
const (
	RoutesAll Routes = iota
	RoutesWS
	RoutesPreview
)

// ParseRoutes reads "all", "ws" or "preview".
func ParseRoutes(s string) (Routes, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "all":
		return RoutesAll, nil
	case "ws", "websocket":
		return RoutesWS, nil
	case "preview":
		return RoutesPreview, nil
	}
	return RoutesAll, fmt.Errorf("routes must be ws, preview or all, not %q", s)
}

func (r Routes) String() string {
	switch r {
	case RoutesWS:
		return "ws"
	case RoutesPreview:
		return "preview"
	}
	return "all"
}

// Config is the proxy's configuration, one field per environment variable of the original.
type Config struct {
	// Secret is AGENT_SANDBOX_PROXY_SECRET: the HS256 key of tickets and the X-Proxy-Token sent to FastGPT.
	Secret string
	// AppURL is FASTGPT_APP_URL, the FastGPT main service.
	AppURL string
	// RequestTimeout is FASTGPT_APP_REQUEST_TIMEOUT_SECS: the whole-call timeout of verifyTicket and keepalive.
	RequestTimeout time.Duration
	// RewriteHost is AGENT_SANDBOX_PROXY_REWRITE_HOST: replaces a loopback host in sandbox URLs.
	RewriteHost string
	// AddressCacheTTL is AGENT_SANDBOX_PROXY_ADDRESS_CACHE_TTL_SECS: how long a resolved preview session is reused.
	AddressCacheTTL time.Duration
	// Routes selects the routes served.
	Routes Routes
	// Logger receives connection events; tokens never reach it.
	Logger *slog.Logger

	timing timing
}

// timing holds the relay's fixed intervals; tests shorten them.
type timing struct {
	connectAttempts   int
	connectInterval   time.Duration
	dialTimeout       time.Duration
	pingInterval      time.Duration
	keepaliveInterval time.Duration
	keepaliveFailures int
	earlyFrames       int
	previewConnect    time.Duration
	closeWait         time.Duration // how long a close handshake may take (the original drains 500 ms)
}

func defaultTiming() timing {
	return timing{
		connectAttempts:   10,
		connectInterval:   300 * time.Millisecond,
		dialTimeout:       10 * time.Second,
		pingInterval:      10 * time.Second,
		keepaliveInterval: 120 * time.Second,
		keepaliveFailures: 3,
		earlyFrames:       5,
		previewConnect:    10 * time.Second,
		closeWait:         500 * time.Millisecond,
	}
}

// ErrSecretTooShort is returned for a secret under MinSecretBytes.
var ErrSecretTooShort = errors.New("AGENT_SANDBOX_PROXY_SECRET must be at least 32 bytes")

func (c *Config) normalize() error {
	if len(c.Secret) < MinSecretBytes {
		return fmt.Errorf("%w (got %d)", ErrSecretTooShort, len(c.Secret))
	}
	c.AppURL = strings.TrimRight(strings.TrimSpace(c.AppURL), "/")
	if c.AppURL == "" {
		c.AppURL = DefaultAppURL
	}
	if !strings.HasPrefix(c.AppURL, "http://") && !strings.HasPrefix(c.AppURL, "https://") {
		return fmt.Errorf("FastGPT app URL %q must start with http:// or https://", c.AppURL)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.AddressCacheTTL <= 0 {
		c.AddressCacheTTL = DefaultAddressCacheTTL
	}
	c.RewriteHost = strings.TrimSpace(c.RewriteHost)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	d := defaultTiming()
	t := &c.timing
	setDefault(&t.connectAttempts, d.connectAttempts)
	setDefault(&t.connectInterval, d.connectInterval)
	setDefault(&t.dialTimeout, d.dialTimeout)
	setDefault(&t.pingInterval, d.pingInterval)
	setDefault(&t.keepaliveInterval, d.keepaliveInterval)
	setDefault(&t.keepaliveFailures, d.keepaliveFailures)
	setDefault(&t.earlyFrames, d.earlyFrames)
	setDefault(&t.previewConnect, d.previewConnect)
	setDefault(&t.closeWait, d.closeWait)
	return nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ParseSeconds reads a duration as the original's variables give it, whole seconds ("10"), or in parse's syntax
// (the gateway passes Caddy's, "1m30s", "1d"); it must be positive.
func ParseSeconds(s string, parse func(string) (time.Duration, error)) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("%q must be positive", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := parse(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither seconds nor a duration", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

// LenientSeconds is ParseSeconds with the original's fallback for environment values: empty, unparsable or
// non-positive means the default (zero here, which New replaces with its default).
func LenientSeconds(s string, parse func(string) (time.Duration, error)) time.Duration {
	d, err := ParseSeconds(s, parse)
	if err != nil {
		return 0
	}
	return d
}
