package sandboxes

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Skills (Bay's skills self-update lifecycle: payloads, candidates, evaluations, releases) are owner state in the
// gateway's own file. The lifecycle's rules are sandboxes/service's (skills.go); this file only keeps the records,
// as opaque JSON, in one bucket per kind keyed owner NUL id. A transaction is bound to one owner, so no operation
// can read or write another owner's records: the key prefix is the store's, never the caller's.
var bucketSkills = []byte("skills") // nested: one bucket per SkillKind

// SkillKind names one kind of skill record.
type SkillKind string

// The kinds of skill records.
const (
	SkillPayloads    SkillKind = "payloads"
	SkillCandidates  SkillKind = "candidates"
	SkillEvaluations SkillKind = "evaluations"
	SkillReleases    SkillKind = "releases"
	// SkillRevisions holds one record per owner, "rev": a counter the service bumps with every change, so a reader
	// can tell in one read whether anything changed.
	SkillRevisions SkillKind = "revisions"
)

func (k SkillKind) valid() bool {
	switch k {
	case SkillPayloads, SkillCandidates, SkillEvaluations, SkillReleases, SkillRevisions:
		return true
	}
	return false
}

// SkillTx reads and writes one owner's skill records inside one store transaction.
type SkillTx interface {
	// Get returns the record kind/id, or nil when there is none.
	Get(kind SkillKind, id string) ([]byte, error)
	// Put stores the record kind/id (a write transaction only).
	Put(kind SkillKind, id string, v []byte) error
	// Each calls fn for every record of kind, in id order; an error from fn stops it and is returned.
	Each(kind SkillKind, fn func(id string, v []byte) error) error
	// Count is how many records of kind the owner has.
	Count(kind SkillKind) (int, error)
}

// SkillStore is implemented by a Store that keeps skill records (BoltStore does).
type SkillStore interface {
	// ViewSkills runs fn over owner's records in a read transaction.
	ViewSkills(owner string, fn func(SkillTx) error) error
	// UpdateSkills runs fn over owner's records in one write transaction: all of fn's writes land, or none.
	UpdateSkills(owner string, fn func(SkillTx) error) error
}

var errSkillReadOnly = errors.New("skill records: write in a read transaction")

type skillTx struct {
	tx     *bolt.Tx
	prefix []byte // owner NUL
}

func skillOwnerPrefix(owner string) ([]byte, error) {
	if owner == "" || bytes.IndexByte([]byte(owner), 0) >= 0 {
		return nil, fmt.Errorf("skill records: invalid owner %q", owner)
	}
	return append([]byte(owner), 0), nil
}

func (t *skillTx) bucket(kind SkillKind, create bool) (*bolt.Bucket, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("skill records: unknown kind %q", kind)
	}
	root := t.tx.Bucket(bucketSkills)
	if root == nil {
		if !create {
			return nil, nil
		}
		var err error
		if root, err = t.tx.CreateBucketIfNotExists(bucketSkills); err != nil {
			return nil, err
		}
	}
	if !create {
		return root.Bucket([]byte(kind)), nil
	}
	return root.CreateBucketIfNotExists([]byte(kind))
}

func (t *skillTx) key(id string) []byte {
	return append(append([]byte{}, t.prefix...), id...)
}

func (t *skillTx) Get(kind SkillKind, id string) ([]byte, error) {
	b, err := t.bucket(kind, false)
	if err != nil || b == nil {
		return nil, err
	}
	v := b.Get(t.key(id))
	if v == nil {
		return nil, nil
	}
	return append([]byte{}, v...), nil // bbolt's slice is only valid inside the transaction
}

func (t *skillTx) Put(kind SkillKind, id string, v []byte) error {
	if !t.tx.Writable() {
		return errSkillReadOnly
	}
	b, err := t.bucket(kind, true)
	if err != nil {
		return err
	}
	return b.Put(t.key(id), v)
}

func (t *skillTx) Each(kind SkillKind, fn func(id string, v []byte) error) error {
	b, err := t.bucket(kind, false)
	if err != nil || b == nil {
		return err
	}
	c := b.Cursor()
	for k, v := c.Seek(t.prefix); k != nil && bytes.HasPrefix(k, t.prefix); k, v = c.Next() {
		if err := fn(string(k[len(t.prefix):]), append([]byte{}, v...)); err != nil {
			return err
		}
	}
	return nil
}

func (t *skillTx) Count(kind SkillKind) (int, error) {
	n := 0
	err := t.Each(kind, func(string, []byte) error { n++; return nil })
	return n, err
}

// ViewSkills runs fn over owner's skill records in a read transaction.
func (s *BoltStore) ViewSkills(owner string, fn func(SkillTx) error) error {
	return s.skillsTx(owner, false, fn)
}

// UpdateSkills runs fn over owner's skill records in one write transaction.
func (s *BoltStore) UpdateSkills(owner string, fn func(SkillTx) error) error {
	return s.skillsTx(owner, true, fn)
}

// skillsTx runs fn over owner's skill records in one transaction, a write one when write.
func (s *BoltStore) skillsTx(owner string, write bool, fn func(SkillTx) error) error {
	prefix, err := skillOwnerPrefix(owner)
	if err != nil {
		return err
	}
	db, err := s.open()
	if err != nil {
		return err
	}
	run := func(tx *bolt.Tx) error { return fn(&skillTx{tx: tx, prefix: prefix}) }
	if write {
		return s.update(db, run)
	}
	return db.View(run)
}
