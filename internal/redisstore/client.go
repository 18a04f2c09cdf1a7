// Package redisstore keeps what a fleet of gateways must share, and the Kubernetes API does not hold, in a Redis an
// operator already runs: the spent-ticket nonces (SpentNonces, a tickets.SpentStore) and Caddy's certificate storage
// (Storage, a certmagic.Storage). It is Caddy-free; caddymodule wires it to the Caddyfile. Standalone Redis (or a
// primary behind a proxy) only: the scripts touch keys they derive, which Redis Cluster would refuse.
package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Options says how to reach Redis.
type Options struct {
	// Addr is host:port.
	Addr string
	// Username and Password authenticate (AUTH, Redis 6 ACL users when Username is set); both may be empty.
	Username, Password string
	// DB is the logical database number.
	DB int
	// TLS, when not nil, is used to connect (rediss); nil is plain TCP.
	TLS *tls.Config
}

// Timeouts of one Redis call. A ticket check waits at most about this long before it is refused as unavailable,
// so a hung Redis turns into quick, retryable refusals instead of hung browser requests.
const (
	dialTimeout = 3 * time.Second
	ioTimeout   = 3 * time.Second
)

// NewClient makes a client for o without connecting: the first command dials.
func NewClient(o Options) (*redis.Client, error) {
	if strings.TrimSpace(o.Addr) == "" {
		return nil, errors.New("redis: an address (host:port) is required")
	}
	if o.DB < 0 {
		return nil, fmt.Errorf("redis: db must be 0 or more, not %d", o.DB)
	}
	return redis.NewClient(&redis.Options{
		Addr:         o.Addr,
		Username:     o.Username,
		Password:     o.Password,
		DB:           o.DB,
		TLSConfig:    o.TLS,
		DialTimeout:  dialTimeout,
		ReadTimeout:  ioTimeout,
		WriteTimeout: ioTimeout,
		// RESP2: what every Redis an operator runs speaks; nothing here needs RESP3's types.
		Protocol: 2,
		// CLIENT SETINFO is unknown to older servers and worth nothing here; maintenance notifications are a Redis
		// Enterprise feature. Neither command then needs an ACL grant.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}), nil
}
