package bayapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// maxJSONBody bounds JSON request bodies (file content travels in PUT filesystem/files, hence generous).
const maxJSONBody = 64 << 20

// fields reads a JSON object body or a query string and collects FastAPI/pydantic-style issues, so a bad request
// gets exactly Bay's 422 {"detail":[...]}.
type fields struct {
	where  string // "body" or "query"
	raw    map[string]any
	query  map[string][]string
	issues []ValidationIssue
}

// bodyFields decodes the request's JSON object. A missing body on a route whose model has required fields, or a
// body that is not JSON, is recorded like FastAPI does.
func bodyFields(r *http.Request, required bool) *fields {
	f := &fields{where: "body", raw: map[string]any{}}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		f.issue("json_invalid", []any{"body"}, "JSON decode error", nil, map[string]any{"error": err.Error()})
		return f
	}
	if len(b) > maxJSONBody {
		f.issue("json_invalid", []any{"body"}, "JSON body too large", nil, map[string]any{"max_bytes": maxJSONBody})
		return f
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if required {
			f.issue("missing", []any{"body"}, "Field required", nil, nil)
		}
		return f
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		f.issue("json_invalid", []any{"body", 0}, "JSON decode error", map[string]any{}, map[string]any{"error": err.Error()})
		return f
	}
	obj, ok := v.(map[string]any)
	if !ok {
		f.issue("model_attributes_type", []any{"body"}, "Input should be a valid dictionary or object to extract fields from", v, nil)
		return f
	}
	f.raw = obj
	return f
}

func queryFields(r *http.Request) *fields {
	return &fields{where: "query", query: r.URL.Query()}
}

func (f *fields) issue(typ string, loc []any, msg string, input any, ctx map[string]any) {
	f.issues = append(f.issues, ValidationIssue{Type: typ, Loc: loc, Msg: msg, Input: input, Ctx: ctx})
}

func (f *fields) err() error {
	if len(f.issues) == 0 {
		return nil
	}
	return &validationError{issues: f.issues}
}

// get returns the raw value of a field and whether it is present and not null.
func (f *fields) get(name string) (any, bool) {
	if f.query != nil {
		v, ok := f.query[name]
		if !ok || len(v) == 0 {
			return nil, false
		}
		return v[len(v)-1], true
	}
	v, ok := f.raw[name]
	return v, ok && v != nil
}

func (f *fields) loc(name string) []any { return []any{f.where, name} }

func (f *fields) str(name string, required bool, def string) string {
	v, ok := f.get(name)
	if !ok {
		if required {
			f.issue("missing", f.loc(name), "Field required", f.input(), nil)
		}
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		f.issue("string_type", f.loc(name), "Input should be a valid string", v, nil)
		return def
	}
	return s
}

func (f *fields) optStr(name string) *string {
	if _, ok := f.get(name); !ok {
		return nil
	}
	s := f.str(name, false, "")
	return &s
}

// input is what FastAPI echoes for a missing field: the whole object (body) or nothing (query).
func (f *fields) input() any {
	if f.query != nil {
		return nil
	}
	return f.raw
}

// integer reads a pydantic lax int: a JSON integer, a float with no fraction, or a numeric string.
func (f *fields) integer(name string, def int64, min, max *int64, exclusiveMin bool) int64 {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	var n int64
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			n = i
		} else if fl, err := t.Float64(); err == nil && fl == math.Trunc(fl) && math.Abs(fl) < 1<<53 {
			n = int64(fl)
		} else {
			f.issue("int_from_float", f.loc(name), "Input should be a valid integer, got a number with a fractional part", v, nil)
			return def
		}
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
		if err != nil {
			f.issue("int_parsing", f.loc(name), "Input should be a valid integer, unable to parse string as an integer", v, nil)
			return def
		}
		n = i
	default:
		f.issue("int_type", f.loc(name), "Input should be a valid integer", v, nil)
		return def
	}
	if min != nil {
		if exclusiveMin && n <= *min {
			f.issue("greater_than", f.loc(name), fmt.Sprintf("Input should be greater than %d", *min), v, map[string]any{"gt": *min})
			return def
		}
		if !exclusiveMin && n < *min {
			f.issue("greater_than_equal", f.loc(name), fmt.Sprintf("Input should be greater than or equal to %d", *min), v, map[string]any{"ge": *min})
			return def
		}
	}
	if max != nil && n > *max {
		f.issue("less_than_equal", f.loc(name), fmt.Sprintf("Input should be less than or equal to %d", *max), v, map[string]any{"le": *max})
		return def
	}
	return n
}

func bound(n int64) *int64 { return &n }

func (f *fields) boolean(name string, def bool) bool {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	switch t := v.(type) {
	case bool:
		return t
	case string:
		switch strings.ToLower(t) {
		case "1", "true", "t", "yes", "y", "on":
			return true
		case "0", "false", "f", "no", "n", "off":
			return false
		}
	case json.Number:
		switch t.String() {
		case "1":
			return true
		case "0":
			return false
		}
	}
	f.issue("bool_parsing", f.loc(name), "Input should be a valid boolean, unable to interpret input", v, nil)
	return def
}

func (f *fields) strList(name string, minLen int) []string {
	v, ok := f.get(name)
	if !ok {
		if minLen > 0 {
			f.issue("missing", f.loc(name), "Field required", f.input(), nil)
		}
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		f.issue("list_type", f.loc(name), "Input should be a valid list", v, nil)
		return nil
	}
	if len(arr) < minLen {
		f.issue("too_short", f.loc(name), fmt.Sprintf("List should have at least %d item after validation, not %d", minLen, len(arr)), v,
			map[string]any{"field_type": "List", "min_length": minLen, "actual_length": len(arr)})
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, item := range arr {
		s, isStr := item.(string)
		if !isStr {
			f.issue("string_type", []any{f.where, name, i}, "Input should be a valid string", item, nil)
			continue
		}
		out = append(out, s)
	}
	return out
}
