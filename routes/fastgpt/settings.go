package fastgpt

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Settings are the proxy's options as the gateway's configuration writes them (caddymodule's fastgpt_proxy): text
// that may hold placeholders and that, left empty, is the original's environment variable of the same meaning.
type Settings struct {
	Secret          string // AGENT_SANDBOX_PROXY_SECRET
	AppURL          string // FASTGPT_APP_URL
	RequestTimeout  string // FASTGPT_APP_REQUEST_TIMEOUT_SECS: a duration or whole seconds
	RewriteHost     string // AGENT_SANDBOX_PROXY_REWRITE_HOST
	AddressCacheTTL string // AGENT_SANDBOX_PROXY_ADDRESS_CACHE_TTL_SECS: a duration or whole seconds
	Serve           string // ws, preview or all (the default)
}

// Config resolves the settings: expand replaces placeholders, parse reads a duration (with the gateway's units).
// A missing secret or an unknown serve is refused; a timeout that does not parse takes its default, as the
// original's does.
func (s Settings) Config(expand func(string) string, parse func(string) (time.Duration, error), logger *slog.Logger) (Config, error) {
	get := func(v, env string) string {
		if v == "" {
			return strings.TrimSpace(os.Getenv(env))
		}
		return strings.TrimSpace(expand(v))
	}
	secret := get(s.Secret, "AGENT_SANDBOX_PROXY_SECRET")
	if secret == "" {
		return Config{}, errors.New("no secret: set AGENT_SANDBOX_PROXY_SECRET or the secret option")
	}
	serve := "all"
	if s.Serve != "" {
		serve = get(s.Serve, "")
	}
	routes, err := ParseRoutes(serve)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Secret:          secret,
		AppURL:          get(s.AppURL, "FASTGPT_APP_URL"),
		RequestTimeout:  LenientSeconds(get(s.RequestTimeout, "FASTGPT_APP_REQUEST_TIMEOUT_SECS"), parse),
		RewriteHost:     get(s.RewriteHost, "AGENT_SANDBOX_PROXY_REWRITE_HOST"),
		AddressCacheTTL: LenientSeconds(get(s.AddressCacheTTL, "AGENT_SANDBOX_PROXY_ADDRESS_CACHE_TTL_SECS"), parse),
		Routes:          routes,
		Logger:          logger,
	}, nil
}
