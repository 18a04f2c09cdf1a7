package caddymodule

import (
	"errors"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/internal/redisstore"
)

func init() {
	caddy.RegisterModule(new(RedisStorage))
}

// RedisStorage is the `caddy.storage.redis` module: Caddy's storage (certificates, ACME accounts, locks) in the
// fleet's Redis, so a certificate one gateway obtains is loaded, not obtained again, by every other. Global option:
//
//	storage redis {
//	    address    <host:port>
//	    password   {env.REDIS_PASSWORD}
//	    key_prefix <prefix>     # default sandgate:; the storage's keys go under <prefix>certmagic:
//	    lock_ttl   <duration>   # how long a dead gateway's lock blocks the others, default 30s
//	    ...                     # username, db, tls: as in unmarshalRedisBlock
//	}
type RedisStorage struct {
	RedisConfig
	// LockTTL is how long a lock outlives a holder that stopped refreshing it; 0 means 30s.
	LockTTL caddy.Duration `json:"lock_ttl,omitempty"`

	storage *redisstore.Storage
	poolKey string
}

// CaddyModule returns the Caddy module information.
func (*RedisStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.storage.redis", New: func() caddy.Module { return new(RedisStorage) }}
}

// Provision takes the pooled client; no I/O.
func (s *RedisStorage) Provision(caddy.Context) error {
	if s.LockTTL < 0 {
		return errors.New("storage redis: lock_ttl must not be negative")
	}
	cl, prefix, key, err := redisClient(&s.RedisConfig)
	if err != nil {
		return err
	}
	s.poolKey = key
	s.storage = redisstore.NewStorage(cl, prefix+"certmagic:", time.Duration(s.LockTTL))
	return nil
}

// CertMagicStorage implements caddy.StorageConverter.
func (s *RedisStorage) CertMagicStorage() (certmagic.Storage, error) {
	if s.storage == nil {
		return nil, errors.New("storage redis: not provisioned")
	}
	return s.storage, nil
}

// Cleanup stops the refreshers of locks still held (they expire in Redis) and releases the client.
func (s *RedisStorage) Cleanup() error {
	if s.storage != nil {
		s.storage.Close()
	}
	return releaseRedis(s.poolKey)
}

// UnmarshalCaddyfile reads the `storage redis { ... }` block.
func (s *RedisStorage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // "redis"
	if err := opt.NoArgs(d); err != nil {
		return err
	}
	return unmarshalRedisBlock(d, &s.RedisConfig, opt.Block{"lock_ttl": opt.PositiveDuration("lock_ttl", &s.LockTTL)})
}

var (
	_ caddy.Provisioner      = (*RedisStorage)(nil)
	_ caddy.CleanerUpper     = (*RedisStorage)(nil)
	_ caddy.StorageConverter = (*RedisStorage)(nil)
	_ caddyfile.Unmarshaler  = (*RedisStorage)(nil)
)
