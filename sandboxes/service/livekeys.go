package service

import (
	"context"
	"sync/atomic"
)

// LiveKeys is the key ring an API loaded last. The gateway keeps one per API data dir across config reloads, and
// every reader of the API's keys (the console, the OpenSandbox and E2B dialects, the edge's api_keys) looks keys up
// in it, so a reload that changes the API's keys changes them everywhere. Safe for concurrent use.
type LiveKeys struct{ ring atomic.Pointer[KeyRing] }

// Store makes ring the one Lookup answers from.
func (k *LiveKeys) Store(ring *KeyRing) { k.ring.Store(ring) }

// Lookup finds the principal of a bearer token in the ring stored last; before any, no token is accepted.
func (k *LiveKeys) Lookup(token string) (Principal, bool) {
	ring := k.ring.Load()
	if ring == nil {
		return Principal{}, false
	}
	return ring.Lookup(token)
}

// KeyAllows reports whether token is a key of keys whose principal sees sandbox id (its owner's, or any for an
// admin key): the edge admits the API's keys on a sandbox's mcp route with it. A sandbox of another owner and one
// that does not exist answer alike.
func (s *Service) KeyAllows(ctx context.Context, keys *LiveKeys, token, id string) bool {
	p, ok := keys.Lookup(token)
	if !ok {
		return false
	}
	_, err := s.Visible(ctx, p, id)
	return err == nil
}

// KeyGate is a service with the live keys it admits: the edge's check of the API's keys (sandboxroute.KeyChecker),
// and what the dialects that take the API's keys are built on.
type KeyGate struct {
	Service *Service
	Keys    *LiveKeys
}

// KeyAllows is Service.KeyAllows over g.Keys.
func (g KeyGate) KeyAllows(ctx context.Context, token, id string) bool {
	return g.Service.KeyAllows(ctx, g.Keys, token, id)
}
