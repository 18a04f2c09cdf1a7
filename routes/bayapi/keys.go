package bayapi

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/sandgate/sandgate/sandboxes/service"
)

// KeySettings are the API's configured keys (sandbox_api's api_key, key, allow_anonymous, endpoint), placeholders
// already expanded, and the data dir credentials.json lives in.
type KeySettings struct {
	APIKey         string
	Keys           []service.KeyConfig
	AllowAnonymous bool
	// Endpoint is written into credentials.json; default the BAY_SERVER__* endpoint (BayEnv.Endpoint).
	Endpoint string
	DataDir  string
}

// LoadKeys loads the API's keys, BAY_API_KEY over the configured one, generating Bay's credentials.json on first
// start (service.LoadKeys), and says whether calls without a token are accepted: BAY_SECURITY__ALLOW_ANONYMOUS
// over allow_anonymous. It logs where the keys came from, and warns when it generated one.
func LoadKeys(ctx context.Context, st service.KeyStore, env BayEnv, s KeySettings, log *slog.Logger) (*service.KeyRing, bool, error) {
	endpoint := s.Endpoint
	if endpoint == "" {
		endpoint = env.Endpoint()
	}
	keys, err := service.LoadKeys(ctx, st, service.KeySetup{
		EnvKey: env.APIKey, ConfigKey: s.APIKey, Extra: s.Keys, DataDir: s.DataDir, Endpoint: endpoint,
	})
	if err != nil {
		return nil, false, err
	}
	anonymous := s.AllowAnonymous
	if env.AllowAnonymous != nil {
		anonymous = *env.AllowAnonymous
	}
	log.Info("sandbox API keys loaded", "source", string(keys.Source), "keys", keys.Len(),
		"allow_anonymous", anonymous, "data_dir", s.DataDir)
	if keys.Source == service.KeyFromGenerated {
		log.Warn("generated an API key; it is in credentials.json (mode 0600)",
			"path", filepath.Join(s.DataDir, service.CredentialsFile))
	}
	return keys, anonymous, nil
}
