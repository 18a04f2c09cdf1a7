package e2b

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Listing: GET /v2/sandboxes and GET /sandboxes, with E2B's query (reference/e2b.md §2.4): state=running,paused
// (comma-joined), metadata (encoded three times), template, limit (1-100, default 100) and nextToken; the next
// page's cursor is the X-Next-Token header, absent on the last page. Only sandboxes made through this dialect are
// listed, and only the caller's.

// MaxPage is the largest page (E2B's limit maximum).
const MaxPage = 100

// NextTokenHeader carries the cursor of the next page.
const NextTokenHeader = "X-Next-Token"

// maxFilterPairs bounds one metadata filter.
const maxFilterPairs = sandboxes.MaxMetadataEntries

// ParseMetadataFilter reads a metadata filter as the query framework hands it over (decoded once): the SDK
// URL-encodes each key and value, joins them as k=v&k=v, URL-encodes that string, and the query serializer encodes
// it again. So: unescape the whole once more, split on & and =, and unescape each key and value.
func ParseMetadataFilter(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	joined, err := url.QueryUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("metadata filter is not validly escaped")
	}
	out := map[string]string{}
	for _, pair := range strings.Split(joined, "&") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("metadata filter: %q is not key=value", pair)
		}
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("metadata filter: %q is not validly escaped", pair)
		}
		if key == "" {
			return nil, fmt.Errorf("metadata filter: an empty key")
		}
		if strings.HasPrefix(key, reservedPrefix) {
			return nil, fmt.Errorf("metadata filter: the %s prefix is reserved", reservedPrefix)
		}
		if prev, dup := out[key]; dup && prev != val {
			return nil, fmt.Errorf("metadata filter: key %q asked with two values", key)
		}
		out[key] = val
		if len(out) > maxFilterPairs {
			return nil, fmt.Errorf("metadata filter: more than %d pairs", maxFilterPairs)
		}
	}
	return out, nil
}

// ParseStates reads state=running,paused (repeatable) into the core's statuses; none means both.
func ParseStates(values []string) ([]sandboxes.Status, error) {
	running := []sandboxes.Status{sandboxes.StatusReady, sandboxes.StatusStarting, sandboxes.StatusIdle}
	paused := []sandboxes.Status{sandboxes.StatusPaused}
	var out []sandboxes.Status
	seen := map[string]bool{}
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" || seen[s] {
				continue
			}
			seen[s] = true
			switch s {
			case "running":
				out = append(out, running...)
			case "paused":
				out = append(out, paused...)
			default:
				return nil, fmt.Errorf("state %q: want running or paused", s)
			}
		}
	}
	if len(out) == 0 {
		out = append(running, paused...)
	}
	return out, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, p service.Principal) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "the query is not validly escaped"))
		return
	}
	for _, k := range []string{"startedAfter", "order"} {
		if q.Has(k) {
			writeError(w, errorf(http.StatusBadRequest, "%s is not supported: sandboxes are listed in the gateway's order", k))
			return
		}
	}
	want := map[string]string{}
	for _, raw := range q["metadata"] {
		md, err := ParseMetadataFilter(raw)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, "%v", err))
			return
		}
		for k, v := range md {
			if prev, dup := want[k]; dup && prev != v {
				writeError(w, errorf(http.StatusBadRequest, "metadata filter: key %q asked with two values", k))
				return
			}
			want[k] = v
		}
	}
	states, err := ParseStates(q["state"])
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%v", err))
		return
	}
	limit := MaxPage
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxPage {
			writeError(w, errorf(http.StatusBadRequest, "limit must be from 1 to %d", MaxPage))
			return
		}
	}
	if t := q.Get("template"); t != "" {
		want[keyTemplate] = t
	}
	wantState := map[string]bool{}
	for _, s := range states {
		switch s {
		case sandboxes.StatusPaused:
			wantState["paused"] = true
		case sandboxes.StatusReady:
			wantState["running"] = true
		}
	}
	// The core is asked for both states and each sandbox kept by its E2B state (present): one its timeout paused or
	// stopped is paused to E2B from the moment that is recorded, while the core may still read it ready (being
	// frozen or stopped) or idle (stopped: autoPauseMemory false).
	all, _ := ParseStates(nil)
	opts := sandboxes.ListOptions{Statuses: all, Metadata: want, Limit: limit, Cursor: q.Get("nextToken")}
	items, next := []ListedSandbox{}, ""
	for {
		page, cursor, err := h.svc.ListSandboxes(r.Context(), p, opts)
		if err != nil {
			writeError(w, toError(err))
			return
		}
		for _, sb := range page {
			// A filter on the template key finds only E2B sandboxes; without one, the others are skipped here.
			if st, ok := stateOf(sb); ok {
				if ls := h.present(sb, st); wantState[ls.State] {
					items = append(items, ls)
				}
			}
		}
		next = cursor
		if next == "" || len(items) > 0 {
			break
		}
		opts.Cursor = next // a page of other dialects' sandboxes only: read on rather than answer an empty page
	}
	if next != "" {
		w.Header().Set(NextTokenHeader, next)
	}
	writeJSON(w, http.StatusOK, items)
}
