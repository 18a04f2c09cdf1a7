package sandboxes

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"
)

// Get returns one sandbox. Warm-pool members are invisible.
func (m *Manager) Get(ctx context.Context, id string) (*Sandbox, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.entries[id]
	if e == nil || e.rec.Warm || e.deleted {
		return nil, notFound(id)
	}
	return m.snapshotLocked(e, time.Now()), nil
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
	now := time.Now()
	m.mu.RLock()
	all := make([]*Sandbox, 0, len(m.entries))
	for _, e := range m.entries {
		if e.rec.Warm || e.deleted || (opts.Owner != "" && e.rec.Owner != opts.Owner) || !matchesMetadata(e.rec.Metadata, opts.Metadata) {
			continue
		}
		sb := m.snapshotLocked(e, now)
		if (opts.Status != "" || len(opts.Statuses) > 0) && sb.Status != opts.Status && !slices.Contains(opts.Statuses, sb.Status) {
			continue
		}
		all = append(all, sb)
	}
	m.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return newerThan(all[i].CreatedAt, all[i].ID, all[j].CreatedAt, all[j].ID) })
	start := 0
	if after != nil {
		start = sort.Search(len(all), func(i int) bool { return newerThan(after.at, after.id, all[i].CreatedAt, all[i].ID) })
	}
	end := min(start+limit, len(all))
	page := all[start:end]
	next := ""
	if end < len(all) && len(page) > 0 {
		last := page[len(page)-1]
		next = encodeCursor(cursor{at: last.CreatedAt, id: last.ID})
	}
	return page, next, nil
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
