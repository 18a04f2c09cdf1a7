package sandboxes

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketKeys holds the API keys the gateway generated or was given, by hash (Bay's stored keys).
var bucketKeys = []byte("api_keys")

// StoredKey is an API key at rest: only its SHA-256.
type StoredKey struct {
	Hash      string    `json:"hash"`
	Owner     string    `json:"owner"`
	Admin     bool      `json:"admin"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
}

// ActiveKeys returns the stored keys that are active.
func (s *BoltStore) ActiveKeys() ([]StoredKey, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	var out []StoredKey
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKeys).ForEach(func(_, v []byte) error {
			var k StoredKey
			if err := json.Unmarshal(v, &k); err != nil {
				return fmt.Errorf("decoding a stored key: %w", err)
			}
			if k.Active {
				out = append(out, k)
			}
			return nil
		})
	})
	return out, err
}

// PutKey stores a key hash.
func (s *BoltStore) PutKey(k StoredKey) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error { return tx.Bucket(bucketKeys).Put([]byte(k.Hash), b) })
}
