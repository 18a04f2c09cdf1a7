package sandboxes

import (
	"encoding/json"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Exports are files a sandbox registered as importable by its owner's other sandboxes (sandbox-agent's
// export/import; the copy itself is routes/bayapi's). The bucket is made on first write.
var bucketExports = []byte("exports") // key: sandbox id NUL path

// Export is one registered file.
type Export struct {
	SandboxID  string    `json:"sandbox_id"`
	Path       string    `json:"path"`
	Owner      string    `json:"owner"`
	ExportedAt time.Time `json:"exported_at"`
}

func exportKey(sandboxID, p string) []byte { return []byte(sandboxID + "\x00" + p) }

// PutExports registers files, replacing earlier registrations of the same paths.
func (s *BoltStore) PutExports(es []Export) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketExports)
		if err != nil {
			return err
		}
		for _, e := range es {
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := b.Put(exportKey(e.SandboxID, e.Path), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Export returns one registered file of a sandbox, or nil.
func (s *BoltStore) Export(sandboxID, p string) (*Export, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	var e *Export
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExports)
		if b == nil {
			return nil
		}
		v := b.Get(exportKey(sandboxID, p))
		if v == nil {
			return nil
		}
		e = new(Export)
		return json.Unmarshal(v, e)
	})
	return e, err
}

// Exports returns a sandbox's registered files in path order.
func (s *BoltStore) Exports(sandboxID string) ([]Export, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	out := []Export{}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExports)
		if b == nil {
			return nil
		}
		prefix := []byte(sandboxID + "\x00")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, v = c.Next() {
			var e Export
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}
