package sandboxes

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Snapshot records live in a bucket of their own in the sandbox store, made on first write.
var bucketSnapshots = []byte("snapshots")

// LoadSnapshots returns every snapshot record.
func (s *BoltStore) LoadSnapshots() ([]Snapshot, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	var out []Snapshot
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r Snapshot
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("snapshot %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// PutSnapshot writes a snapshot record.
func (s *BoltStore) PutSnapshot(r Snapshot) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSnapshots)
		if err != nil {
			return err
		}
		return b.Put([]byte(r.ID), v)
	})
}

// DeleteSnapshot removes a snapshot record; a missing one is not an error.
func (s *BoltStore) DeleteSnapshot(id string) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSnapshots)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(id))
	})
}

var _ SnapshotStore = (*BoltStore)(nil)
