package redisstore

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// Config says how a gateway reaches the Redis its fleet shares (docs/kubernetes.md, "Gateway fleet: shared
// store"): the spent tickets of sandbox_ticket and sandbox_pages, and the `storage redis` of certificates. It is the
// JSON of those modules' redis blocks; every string may hold placeholders, which Resolve expands, so the password
// can come from {env.REDIS_PASSWORD}.
type Config struct {
	// Address is host:port.
	Address string `json:"address,omitempty"`
	// Username (a Redis 6 ACL user) and Password; both optional.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// DB is the logical database number.
	DB int `json:"db,omitempty"`
	// KeyPrefix starts every key written; default DefaultKeyPrefix. Gateways of one fleet use the same one;
	// another fleet on the same Redis uses another.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// TLS connects with TLS when set.
	TLS *TLSConfig `json:"tls,omitempty"`
}

// TLSConfig is the TLS of a Redis connection.
type TLSConfig struct {
	// ServerName to verify; default the address's host.
	ServerName string `json:"server_name,omitempty"`
	// CAFile is a PEM file of the roots to trust; default the system's.
	CAFile string `json:"ca_file,omitempty"`
}

// DefaultKeyPrefix starts every key when Config.KeyPrefix is empty.
const DefaultKeyPrefix = "sandgate:"

// Resolve expands the placeholders of every string with expand and reads the CA file: the Options to connect
// with, the key prefix (KeyPrefix or its default), and a key naming the target among others (a hash: the target
// includes the password).
func (c *Config) Resolve(expand func(string) string) (o Options, prefix, target string, err error) {
	o = Options{Addr: expand(c.Address), Username: expand(c.Username), Password: expand(c.Password), DB: c.DB}
	if o.Addr == "" {
		return o, "", "", fmt.Errorf("redis: address is required (host:port)")
	}
	prefix = expand(c.KeyPrefix)
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	if c.TLS != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: expand(c.TLS.ServerName)}
		if f := expand(c.TLS.CAFile); f != "" {
			pem, err := os.ReadFile(f)
			if err != nil {
				return o, "", "", fmt.Errorf("redis: tls ca_file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return o, "", "", fmt.Errorf("redis: tls ca_file %s holds no PEM certificate", f)
			}
		}
		o.TLS = cfg
	}
	id, _ := json.Marshal([]any{o.Addr, o.Username, o.Password, o.DB, c.TLS})
	sum := sha256.Sum256(id)
	return o, prefix, hex.EncodeToString(sum[:]), nil
}

// ParseDB reads a redis block's `db <n>`: a database number, 0 or more.
func ParseDB(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("db must be a database number, not %q", v)
	}
	return n, nil
}
