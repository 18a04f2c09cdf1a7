package caddymodule

import (
	"errors"
	"maps"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	opt "github.com/sandgate/sandgate/internal/caddyfileopt"
	"github.com/sandgate/sandgate/internal/redisstore"
)

// RedisConfig says how a module reaches the Redis a gateway fleet shares (redisstore.Config): sandbox_ticket's
// and sandbox_pages' replay_redis, and the `storage redis` of certificates.
type RedisConfig = redisstore.Config

// RedisTLS is the TLS of a Redis connection.
type RedisTLS = redisstore.TLSConfig

// redisClients holds one client (one connection pool) per Redis target across config reloads, shared by every
// module that names the same target.
var redisClients = newPool[*redis.Client]()

// redisClient takes the pooled client of c's target; release it with releaseRedis(key). No I/O: the client dials
// on its first command.
func redisClient(c *RedisConfig) (cl *redis.Client, prefix, key string, err error) {
	repl := caddy.NewReplacer()
	o, prefix, target, err := c.Resolve(func(s string) string { return repl.ReplaceKnown(s, "") })
	if err != nil {
		return nil, "", "", err
	}
	key = "sandgate.redis." + target
	cl, err = redisClients.load(key, func() (*redis.Client, error) { return redisstore.NewClient(o) })
	if err != nil {
		return nil, "", "", err
	}
	return cl, prefix, key, nil
}

func releaseRedis(key string) error { return redisClients.release(key) }

// unmarshalRedisBlock reads the block shared by `replay_redis` and `storage redis`:
//
//	{
//	    address    <host:port>
//	    username   <user>
//	    password   <password>       # e.g. {env.REDIS_PASSWORD}
//	    db         <n>
//	    key_prefix <prefix>         # default sandgate:
//	    tls        [<server name>] { ca_file <pem> }
//	}
//
// and the options of more, the module's own.
func unmarshalRedisBlock(d *caddyfile.Dispenser, c *RedisConfig, more opt.Block) error {
	db := opt.Arg(func(v string) (err error) { c.DB, err = redisstore.ParseDB(v); return err })
	tls := func(d *caddyfile.Dispenser) error {
		c.TLS = &RedisTLS{}
		if err := opt.OptString(&c.TLS.ServerName, "")(d); err != nil {
			return err
		}
		return opt.Block{"ca_file": opt.String(&c.TLS.CAFile)}.Parse(d, "unknown redis tls option %q (ca_file)")
	}
	b := opt.Block{"address": opt.String(&c.Address), "username": opt.String(&c.Username), "password": opt.String(&c.Password),
		"key_prefix": opt.String(&c.KeyPrefix), "db": db, "tls": tls}
	maps.Copy(b, more)
	if err := b.Parse(d, "unknown redis option %q"); err != nil {
		return err
	}
	if c.Address == "" {
		return d.Err("redis: address is required")
	}
	return nil
}

// redisOption reads an option with a redis block (`replay_redis { ... }`) into *dst.
func redisOption(dst **RedisConfig) opt.Option {
	return func(d *caddyfile.Dispenser) error {
		*dst = new(RedisConfig)
		if err := opt.NoArgs(d); err != nil {
			return err
		}
		return unmarshalRedisBlock(d, *dst, nil)
	}
}

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
