package caddymodule

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
var redisClients = caddy.NewUsagePool()

type pooledRedis struct{ *redis.Client }

func (p pooledRedis) Destruct() error { return p.Close() }

// redisClient takes the pooled client of c's target; release it with releaseRedis(key). No I/O: the client dials
// on its first command.
func redisClient(c *RedisConfig) (cl *redis.Client, prefix, key string, err error) {
	repl := caddy.NewReplacer()
	o, prefix, target, err := c.Resolve(func(s string) string { return repl.ReplaceKnown(s, "") })
	if err != nil {
		return nil, "", "", err
	}
	key = "sandgate.redis." + target
	v, _, err := redisClients.LoadOrNew(key, func() (caddy.Destructor, error) {
		cl, err := redisstore.NewClient(o)
		if err != nil {
			return nil, err
		}
		return pooledRedis{cl}, nil
	})
	if err != nil {
		return nil, "", "", err
	}
	return v.(pooledRedis).Client, prefix, key, nil
}

func releaseRedis(key string) error {
	if key == "" {
		return nil
	}
	_, err := redisClients.Delete(key)
	return err
}

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
	db := opt.Arg(func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("db must be a database number, not %q", v)
		}
		c.DB = n
		return nil
	})
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
