package sandboxes

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"
)

// Get returns one sandbox. Warm-pool members are invisible.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, err := m.visibleLocked(id)
	if err != nil {
		return nil, err
	}
	return m.snapshotLocked(e, m.clock()), nil
}

// List returns sandboxes newest first, a page at a time; nextCursor is "" on the last page.
func (m *Manager) List(ctx context.Context, opts ListOptions) ([]*Sandbox, string, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = 50
	}
	if limit > 1000 {
		limit = 1000
	}
	var after *cursor
	if opts.Cursor != "" {
		c, err := decodeCursor(opts.Cursor)
		if err != nil {
			return nil, "", Errorf(CodeInvalid, "invalid cursor")
		}
		after = &c
	}
	// Pick the page's entries first, cheaply (a filter and a comparison each), and take snapshots of those alone: a
	// page of 10 out of n sandboxes costs n comparisons, not n snapshots (their metadata and capabilities copied)
	// and a sort of all of them.
	now := m.clock()
	m.mu.RLock()
	defer m.mu.RUnlock()
	page := make([]*entry, 0, min(limit+1, len(m.entries))) // newest first; one more than the limit says there is a next page
	for _, e := range m.entries {
		if !visible(e) || (opts.Owner != "" && e.rec.Owner != opts.Owner) || !matchesMetadata(e.rec.Metadata, opts.Metadata) {
			continue
		}
		if st := statusOf(e, now); (opts.Status != "" || len(opts.Statuses) > 0) && st != opts.Status && !slices.Contains(opts.Statuses, st) {
			continue
		}
		if after != nil && !newerThan(after.at, after.id, e.rec.CreatedAt, e.rec.ID) {
			continue
		}
		if len(page) == limit+1 && newestFirst(e, page[limit]) > 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(page, e, newestFirst)
		page = slices.Insert(page, i, e)
		if len(page) > limit+1 {
			page = page[:limit+1]
		}
	}
	next := ""
	if len(page) > limit {
		page = page[:limit]
		last := page[limit-1]
		next = encodeCursor(cursor{at: last.rec.CreatedAt, id: last.rec.ID})
	}
	out := make([]*Sandbox, len(page))
	for i, e := range page {
		out[i] = m.snapshotLocked(e, now)
	}
	return out, next, nil
}

// newestFirst orders entries as List returns them: newer first, ties on the creation time by id. Ids are unique, so
// no two entries compare equal.
func newestFirst(a, b *entry) int {
	if newerThan(a.rec.CreatedAt, a.rec.ID, b.rec.CreatedAt, b.rec.ID) {
		return -1
	}
	return 1
}

func newerThan(at1 time.Time, id1 string, at2 time.Time, id2 string) bool {
	if !at1.Equal(at2) {
		return at1.After(at2)
	}
	return id1 > id2
}

type cursor struct {
	at time.Time
	id string
}

func encodeCursor(c cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.at.UTC().Format(time.RFC3339Nano) + "|" + c.id))
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, err
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return cursor{}, errors.New("malformed cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return cursor{}, err
	}
	return cursor{at: t, id: id}, nil
}
