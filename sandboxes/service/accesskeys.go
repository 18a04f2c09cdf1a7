package service

import (
	"context"
	"crypto/subtle"
)

// Per-sandbox access keys: the credential of a caller that holds no principal (OpenSandbox's proxy URLs).

func (s *Service) accessKeyer() (AccessKeyer, error) {
	ak, ok := s.cfg.Sandboxes.(AccessKeyer)
	if !ok {
		return nil, Errorf(CodeCapability, "access keys are not available on this gateway").With("capability", "access_keys").With("available", []string{})
	}
	return ak, nil
}

// AccessKey is the key for purpose of a sandbox p may see: an HMAC under the sandbox's own agent token, valid while
// the sandbox exists (sandboxes.Manager.AccessKey).
func (s *Service) AccessKey(ctx context.Context, p Principal, id, purpose string) (string, error) {
	ak, err := s.accessKeyer()
	if err != nil {
		return "", err
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		return "", err
	}
	return ak.AccessKey(id, purpose)
}

// AccessKeyValid says, in constant time, whether key is the sandbox's key for purpose: the credential of a caller
// that has no principal (a URL handed out by AccessKey). A missing sandbox has no valid key.
func (s *Service) AccessKeyValid(id, purpose, key string) bool {
	ak, err := s.accessKeyer()
	if err != nil || key == "" {
		return false
	}
	want, err := ak.AccessKey(id, purpose)
	return err == nil && subtle.ConstantTimeCompare([]byte(key), []byte(want)) == 1
}
