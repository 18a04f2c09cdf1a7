package sandboxes

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Exports are files a sandbox registered as importable by its owner's other sandboxes (sandbox-agent's
// export/import; the copy itself is routes/bayapi's). The buckets are made on first write.
//
// A registration is owner state in the gateway's own file, so it is bounded (issue 33): each owner keeps at most
// ExportLimits of them, each lives ExportLimits.TTL from its last registration, and a sandbox's registrations go in the
// same transaction as its record (Delete). The index bucket lets a quota check read one owner's entries only.
var (
	bucketExports        = []byte("exports")          // key: sandbox id NUL path; value: Export as JSON
	bucketExportsByOwner = []byte("exports_by_owner") // key: owner NUL sandbox id NUL path; value: exportIndex
)

// DefaultExportTTL is how long a registration lives after its last export call unless ExportLimits.TTL says
// otherwise; exporting the path again renews it. The sweep (ReapHistory) removes expired ones, and an expired one is
// already refused before the sweep runs.
const DefaultExportTTL = 7 * 24 * time.Hour

// MaxExportPathBytes bounds one exported path (Linux's PATH_MAX).
const MaxExportPathBytes = 4096

// ExportLimits bound the registrations one owner keeps. A zero field takes its default.
type ExportLimits struct {
	// MaxPerOwner caps the registrations of one owner across all of its sandboxes. Default 10,000.
	MaxPerOwner int
	// MaxBytesPerOwner caps the bytes those registrations take in the store. Default 8 MiB.
	MaxBytesPerOwner int64
	// TTL is how long a registration lives after its last export call. Default DefaultExportTTL. Each registration
	// records its own expiry, so a TTL changed later applies to registrations made (or renewed) after the change.
	TTL time.Duration
}

func (l ExportLimits) withDefaults() ExportLimits {
	if l.MaxPerOwner <= 0 {
		l.MaxPerOwner = 10000
	}
	if l.MaxBytesPerOwner <= 0 {
		l.MaxBytesPerOwner = 8 << 20
	}
	if l.TTL <= 0 {
		l.TTL = DefaultExportTTL
	}
	return l
}

// ExpiresAt is when a registration made at exportedAt expires under l.
func (l ExportLimits) ExpiresAt(exportedAt time.Time) time.Time {
	return exportedAt.Add(l.withDefaults().TTL)
}

// Export is one registered file.
type Export struct {
	SandboxID  string    `json:"sandbox_id"`
	Path       string    `json:"path"`
	Owner      string    `json:"owner"`
	ExportedAt time.Time `json:"exported_at"`
	// ExpiresAt is ExportedAt + the TTL in force when it was registered (ExportLimits.TTL; filled on read with
	// DefaultExportTTL for registrations stored before it existed).
	ExpiresAt time.Time `json:"expires_at"`
}

// Expired reports whether the registration has expired at now.
func (e *Export) Expired(now time.Time) bool { return !now.Before(expiresOf(*e)) }

func exportKey(sandboxID, p string) []byte { return []byte(sandboxID + "\x00" + p) }

func exportOwnerKey(owner, sandboxID, p string) []byte {
	return []byte(owner + "\x00" + sandboxID + "\x00" + p)
}

// exportIndex is an index entry's value: the bytes the registration takes, when it was made and when it expires,
// so a quota check and its pruning of expired entries never decode the registrations themselves.
func exportIndex(size int, at, expires time.Time) []byte {
	v := make([]byte, 24)
	binary.BigEndian.PutUint64(v, uint64(size))
	binary.BigEndian.PutUint64(v[8:], uint64(at.UnixNano()))
	binary.BigEndian.PutUint64(v[16:], uint64(expires.UnixNano()))
	return v
}

// parseExportIndex reads an index value. One of 16 bytes (size and time, written before the TTL could be set)
// expires DefaultExportTTL after its time, as its registration does.
func parseExportIndex(v []byte) (size int64, expires time.Time) {
	switch len(v) {
	case 24:
		return int64(binary.BigEndian.Uint64(v)), time.Unix(0, int64(binary.BigEndian.Uint64(v[16:])))
	case 16:
		return int64(binary.BigEndian.Uint64(v)), time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).Add(DefaultExportTTL)
	}
	return 0, time.Time{} // damaged: counts nothing and is pruned as expired
}

// PutExports registers files, replacing (and renewing) earlier registrations of the same paths. It refuses the
// whole call with a quota_exceeded *Error when an owner's registrations would pass l; expired ones do not count.
func (s *BoltStore) PutExports(es []Export, l ExportLimits) error {
	l = l.withDefaults()
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketExports)
		if err != nil {
			return err
		}
		ix, err := tx.CreateBucketIfNotExists(bucketExportsByOwner)
		if err != nil {
			return err
		}
		type usage struct {
			n     int
			bytes int64
		}
		used := map[string]*usage{}
		put := map[string][]byte{} // this call's entries by key: a path named twice counts once
		for _, e := range es {
			if e.ExportedAt.IsZero() {
				return fmt.Errorf("export of %s has no time", e.Path)
			}
			e.ExpiresAt = e.ExportedAt.Add(l.TTL)
			if used[e.Owner] == nil {
				u := &usage{}
				u.n, u.bytes, err = ownerExports(b, ix, e.Owner, e.ExportedAt)
				if err != nil {
					return err
				}
				used[e.Owner] = u
			}
			k := exportKey(e.SandboxID, e.Path)
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			u := used[e.Owner]
			if prev, ok := put[string(k)]; ok {
				u.n--
				u.bytes -= int64(len(k) + len(prev))
			} else if old := b.Get(k); old != nil && ix.Get(exportOwnerKey(e.Owner, e.SandboxID, e.Path)) != nil {
				u.n-- // a live registration being renewed is replaced, not added
				u.bytes -= int64(len(k) + len(old))
			}
			put[string(k)] = v
			u.n++
			u.bytes += int64(len(k) + len(v))
			if u.n > l.MaxPerOwner {
				return exportQuotaError("export_count", fmt.Sprintf("the owner would keep %d exported paths, the limit is %d", u.n, l.MaxPerOwner), l.MaxPerOwner, u.n)
			}
			if u.bytes > l.MaxBytesPerOwner {
				return exportQuotaError("export_bytes", fmt.Sprintf("the owner's exported paths would take %d bytes, the limit is %d", u.bytes, l.MaxBytesPerOwner), l.MaxBytesPerOwner, u.bytes)
			}
			if err := b.Put(k, v); err != nil {
				return err
			}
			if err := ix.Put(exportOwnerKey(e.Owner, e.SandboxID, e.Path), exportIndex(len(k)+len(v), e.ExportedAt, e.ExpiresAt)); err != nil {
				return err
			}
		}
		return nil
	})
}

func exportQuotaError(scope, msg string, limit, used any) error {
	return &Error{Code: CodeQuotaExceeded, Message: msg,
		Hint:    "export fewer or shorter paths, delete sandboxes whose exports you no longer need, or wait for old exports to expire",
		Details: map[string]any{"scope": scope, "limit": limit, "used": used}}
}

// ownerExports counts an owner's live registrations and their bytes, removing the expired ones it meets.
func ownerExports(b, ix *bolt.Bucket, owner string, now time.Time) (int, int64, error) {
	prefix := []byte(owner + "\x00")
	var n int
	var size int64
	var expired [][]byte
	c := ix.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		sz, expires := parseExportIndex(v)
		if !now.Before(expires) {
			expired = append(expired, bytes.Clone(k))
			continue
		}
		n++
		size += sz
	}
	for _, k := range expired {
		if err := ix.Delete(k); err != nil {
			return 0, 0, err
		}
		if err := b.Delete(k[len(prefix):]); err != nil { // the index key is owner NUL <the registration's key>
			return 0, 0, err
		}
	}
	return n, size, nil
}

// Export returns one registered file of a sandbox, or nil. An expired registration is returned as it is: the
// caller compares it with its clock (Export.Expired).
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
		return decodeExport(v, e)
	})
	return e, err
}

// expiresOf is e's expiry, DefaultExportTTL after its registration for one stored before ExpiresAt existed.
func expiresOf(e Export) time.Time {
	if e.ExpiresAt.IsZero() {
		return e.ExportedAt.Add(DefaultExportTTL)
	}
	return e.ExpiresAt
}

func decodeExport(v []byte, e *Export) error {
	if err := json.Unmarshal(v, e); err != nil {
		return fmt.Errorf("decoding an export: %w", err)
	}
	if e.ExpiresAt.IsZero() {
		e.ExpiresAt = e.ExportedAt.Add(DefaultExportTTL)
	}
	return nil
}

// Exports returns a sandbox's registered files in path order, expired ones included (Export.Expired).
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
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var e Export
			if err := decodeExport(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// dropExportsTx removes every registration of a sandbox and its index entries.
func dropExportsTx(tx *bolt.Tx, sandboxID string) error {
	b := tx.Bucket(bucketExports)
	if b == nil {
		return nil
	}
	ix := tx.Bucket(bucketExportsByOwner)
	prefix := []byte(sandboxID + "\x00")
	var keys, owners [][]byte
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var e Export
		_ = json.Unmarshal(v, &e) // a damaged value still goes; its index entry, if any, is found by the sweep
		keys = append(keys, bytes.Clone(k))
		owners = append(owners, []byte(e.Owner))
	}
	for i, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
		if ix != nil {
			if err := ix.Delete(append(append(owners[i], 0), k...)); err != nil {
				return err
			}
		}
	}
	return nil
}

// DropExports forgets every registration of a sandbox. Delete does it with the record; this is for a sandbox whose
// record is already gone.
func (s *BoltStore) DropExports(sandboxID string) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	return s.update(db, func(tx *bolt.Tx) error { return dropExportsTx(tx, sandboxID) })
}

// SweepExports removes the registrations that expired at now and those of sandboxes alive says are gone, drops
// index entries that point at nothing, and indexes registrations stored before the index existed (so an upgraded
// store's entries count towards their owner's quota from the first sweep). It returns how many registrations went.
// alive is called outside any transaction.
func (s *BoltStore) SweepExports(now time.Time, alive func(sandboxID string) bool) (int, error) {
	db, err := s.open()
	if err != nil {
		return 0, err
	}
	var ids []string
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExports)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, _ := c.First(); k != nil; {
			id, _, ok := bytes.Cut(k, []byte{0})
			if !ok {
				k, _ = c.Next()
				continue
			}
			ids = append(ids, string(id))
			k, _ = c.Seek(append(bytes.Clone(id), 1)) // the next sandbox's first key
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	gone := map[string]bool{}
	for _, id := range ids {
		if !alive(id) {
			gone[id] = true
		}
	}
	removed := 0
	err = s.update(db, func(tx *bolt.Tx) error {
		removed = 0
		b := tx.Bucket(bucketExports)
		ix, err := tx.CreateBucketIfNotExists(bucketExportsByOwner)
		if err != nil {
			return err
		}
		type drop struct{ key, ixKey []byte }
		var drops []drop
		var index [][2][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			id, _, _ := bytes.Cut(k, []byte{0})
			var e Export
			bad := json.Unmarshal(v, &e) != nil
			ixKey := append(append([]byte(e.Owner), 0), k...)
			if bad || gone[string(id)] || e.Expired(now) {
				drops = append(drops, drop{bytes.Clone(k), ixKey})
				continue
			}
			if ix.Get(ixKey) == nil {
				index = append(index, [2][]byte{ixKey, exportIndex(len(k)+len(v), e.ExportedAt, expiresOf(e))})
			}
		}
		for _, d := range drops {
			if err := b.Delete(d.key); err != nil {
				return err
			}
			if err := ix.Delete(d.ixKey); err != nil {
				return err
			}
			removed++
		}
		for _, kv := range index {
			if err := ix.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		// Index entries whose registration went some other way.
		var stale [][]byte
		ic := ix.Cursor()
		for k, _ := ic.First(); k != nil; k, _ = ic.Next() {
			_, rest, ok := bytes.Cut(k, []byte{0})
			if !ok || b.Get(rest) == nil {
				stale = append(stale, bytes.Clone(k))
			}
		}
		for _, k := range stale {
			if err := ix.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return removed, err
}
