package caddymodule

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/redis/go-redis/v9"

	"github.com/sandgate/sandgate/internal/redisstore"
)

// RedisConfig says how a module reaches the Redis a gateway fleet shares (docs/kubernetes.md, "Gateway fleet:
// shared store"): sandbox_ticket's and sandbox_pages' spent tickets, and the `storage redis` of certificates.
// Every field takes placeholders, so the password can come from {env.REDIS_PASSWORD}.
type RedisConfig struct {
	// Address is host:port.
	Address string `json:"address,omitempty"`
	// Username (a Redis 6 ACL user) and Password; both optional.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// DB is the logical database number.
	DB int `json:"db,omitempty"`
	// KeyPrefix starts every key written; default "sandgate:". Gateways of one fleet use the same one; another
	// fleet on the same Redis uses another.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// TLS connects with TLS when set.
	TLS *RedisTLS `json:"tls,omitempty"`
}

// RedisTLS is the TLS of a Redis connection.
type RedisTLS struct {
	// ServerName to verify; default the address's host.
	ServerName string `json:"server_name,omitempty"`
	// CAFile is a PEM file of the roots to trust; default the system's.
	CAFile string `json:"ca_file,omitempty"`
}

const defaultRedisPrefix = "sandgate:"

// redisClients holds one client (one connection pool) per Redis target across config reloads, shared by every
// module that names the same target.
var redisClients = caddy.NewUsagePool()

type pooledRedis struct{ *redis.Client }

func (p pooledRedis) Destruct() error { return p.Close() }

// resolved is the config with placeholders expanded; prefix is KeyPrefix or its default.
func (c *RedisConfig) resolved() (redisstore.Options, string, error) {
	repl := caddy.NewReplacer()
	o := redisstore.Options{
		Addr:     repl.ReplaceKnown(c.Address, ""),
		Username: repl.ReplaceKnown(c.Username, ""),
		Password: repl.ReplaceKnown(c.Password, ""),
		DB:       c.DB,
	}
	if o.Addr == "" {
		return o, "", fmt.Errorf("redis: address is required (host:port)")
	}
	prefix := repl.ReplaceKnown(c.KeyPrefix, "")
	if prefix == "" {
		prefix = defaultRedisPrefix
	}
	if c.TLS != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: repl.ReplaceKnown(c.TLS.ServerName, "")}
		if f := repl.ReplaceKnown(c.TLS.CAFile, ""); f != "" {
			pem, err := os.ReadFile(f)
			if err != nil {
				return o, "", fmt.Errorf("redis: tls ca_file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return o, "", fmt.Errorf("redis: tls ca_file %s holds no PEM certificate", f)
			}
		}
		o.TLS = cfg
	}
	return o, prefix, nil
}

// client takes the pooled client of the config's target; release it with releaseRedis(key). No I/O: the client
// dials on its first command.
func (c *RedisConfig) client() (*redis.Client, string, string, error) {
	o, prefix, err := c.resolved()
	if err != nil {
		return nil, "", "", err
	}
	// The pool key is a hash: it holds the password.
	id, _ := json.Marshal([]any{o.Addr, o.Username, o.Password, o.DB, c.TLS})
	sum := sha256.Sum256(id)
	key := "sandgate.redis." + hex.EncodeToString(sum[:])
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
