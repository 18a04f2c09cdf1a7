package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/redis/go-redis/v9"

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
// It leaves options it does not know to other, which answers whether it took the option.
func unmarshalRedisBlock(d *caddyfile.Dispenser, c *RedisConfig, other func(name string) (bool, error)) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		switch name {
		case "address", "username", "password", "key_prefix":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			switch name {
			case "address":
				c.Address = v
			case "username":
				c.Username = v
			case "password":
				c.Password = v
			default:
				c.KeyPrefix = v
			}
		case "db":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return d.Errf("db must be a database number, not %q", v)
			}
			c.DB = n
		case "tls":
			c.TLS = &RedisTLS{}
			if d.NextArg() {
				c.TLS.ServerName = d.Val()
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			for n := d.Nesting(); d.NextBlock(n); {
				if d.Val() != "ca_file" {
					return d.Errf("unknown redis tls option %q (ca_file)", d.Val())
				}
				if !d.AllArgs(&c.TLS.CAFile) {
					return d.ArgErr()
				}
			}
		default:
			took := false
			if other != nil {
				var err error
				if took, err = other(name); err != nil {
					return err
				}
			}
			if !took {
				return d.Errf("unknown redis option %q", name)
			}
		}
	}
	if c.Address == "" {
		return d.Err("redis: address is required")
	}
	return nil
}
