package sandboxes

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketCargos holds workspace records by id. The name is Bay's (a cargo is its workspace): it is the bucket the
// API's store had, so a migrated store (store_migrate.go) and this one agree byte for byte.
var bucketCargos = []byte("cargos")

// Workspace is a workspace volume a caller made (CreateWorkspace, Bay's POST /v1/cargos), or the record an API keeps
// of a sandbox's own workspace (Managed). Its JSON shape is the one the API's store always had.
type Workspace struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Managed marks a sandbox's own workspace, removed with that sandbox (ManagedBySandboxID).
	Managed            bool    `json:"managed"`
	ManagedBySandboxID *string `json:"managed_by_sandbox_id"`
	// Backend names the kind of volume ("docker_volume").
	Backend        string    `json:"backend"`
	SizeLimitMB    int       `json:"size_limit_mb"`
	CreatedAt      time.Time `json:"created_at"`
	LastAccessedAt time.Time `json:"last_accessed_at"`
}

// WorkspaceStore is implemented by a Store that keeps workspace records (BoltStore does). The method names are
// Bay's (cargo): the API layer reads as it always did.
type WorkspaceStore interface {
	PutCargo(w *Workspace) error
	// Cargo returns one record, or nil.
	Cargo(id string) (*Workspace, error)
	// Cargos returns every record in id order.
	Cargos() ([]*Workspace, error)
	DeleteCargo(id string) error
}

// PutCargo stores a workspace record.
func (s *BoltStore) PutCargo(w *Workspace) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error { return tx.Bucket(bucketCargos).Put([]byte(w.ID), b) })
}

// Cargo returns one workspace record, or nil.
func (s *BoltStore) Cargo(id string) (*Workspace, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	var w *Workspace
	err = db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCargos).Get([]byte(id))
		if v == nil {
			return nil
		}
		w = new(Workspace)
		return json.Unmarshal(v, w)
	})
	return w, err
}

// Cargos returns every workspace record in id order.
func (s *BoltStore) Cargos() ([]*Workspace, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	var out []*Workspace
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCargos).ForEach(func(_, v []byte) error {
			w := new(Workspace)
			if err := json.Unmarshal(v, w); err != nil {
				return err
			}
			out = append(out, w)
			return nil
		})
	})
	return out, err
}

// DeleteCargo forgets a workspace record; a missing one is not an error.
func (s *BoltStore) DeleteCargo(id string) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error { return tx.Bucket(bucketCargos).Delete([]byte(id)) })
}

var _ WorkspaceStore = (*BoltStore)(nil)
