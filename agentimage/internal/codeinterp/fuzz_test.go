package codeinterp

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// FuzzParseExecute: any body is a request or a typed error, never a panic; an accepted one is within the limits.
func FuzzParseExecute(f *testing.F) {
	for _, s := range []string{
		`{"code":"print(1)"}`, `{"code":"1","language":"js"}`, `{"code":"1","context_id":"abc","language":"python"}`,
		`{"code":"1","env_vars":{"A":"b","C=D":"e"}}`, `{"context_id":"../../etc"}`, `{"code":null}`, `[]`, ``, `{"code":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseExecute(body)
		if err != nil {
			var e *agentapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if req.ContextID != "" && (req.Language != "" || CheckContextID(req.ContextID) != nil) {
			t.Fatalf("accepted %+v", req)
		}
		if req.ContextID == "" {
			if _, err := canonicalLanguage(req.Language); err != nil {
				t.Fatalf("accepted language %q", req.Language)
			}
		}
		for k, v := range req.EnvVars {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				t.Fatalf("accepted env %q=%q", k, v)
			}
		}
	})
}

// FuzzContextID: an accepted id is short and has only URL- and log-safe characters.
func FuzzContextID(f *testing.F) {
	for _, s := range []string{"0123456789abcdef", "a-b_c", "", "../x", "a\x00b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if CheckContextID(id) != nil {
			return
		}
		if len(id) == 0 || len(id) > maxIDLen || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			t.Fatalf("accepted %q", id)
		}
	})
}

// FuzzParseCreateContext: an accepted request has a known language and a clean absolute cwd.
func FuzzParseCreateContext(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"language":"r","cwd":"/home/user/x/.."}`, `{"cwd":"rel"}`, `{"cwd":"/\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseCreateContext(body)
		if err != nil {
			return
		}
		if _, ok := languageAliases[req.Language]; !ok || !strings.HasPrefix(req.Cwd, "/") || strings.Contains(req.Cwd, "/../") || strings.ContainsRune(req.Cwd, 0) {
			t.Fatalf("accepted %+v", req)
		}
	})
}

// FuzzParseEnvHeader: the gateway's header decodes to variables a process environment can hold, or is refused.
func FuzzParseEnvHeader(f *testing.F) {
	for _, s := range []string{`{"A":"b"}`, `{"A=":"b"}`, `{"A":"\u0000"}`, `{}`, `null`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		env, err := ParseEnvHeader(v)
		if err != nil {
			return
		}
		for k, val := range env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(val, 0) || !utf8.ValidString(k+val) {
				t.Fatalf("accepted %q=%q", k, val)
			}
		}
	})
}

// FuzzOutbox: whatever bytes a cell prints, in whatever pieces, the text lines carry them in order, and every line
// but a final incomplete character is valid UTF-8.
func FuzzOutbox(f *testing.F) {
	f.Add([]byte("héllo wörld €"), uint8(3))
	f.Add([]byte{0xe2, 0x82, 0xac, 0xff, 0xf0, 0x9f}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		n := int(step%7) + 1
		o := newOutbox()
		var got []byte
		for i := 0; i < len(data); i += n {
			o.add(lineStdout, data[i:min(i+n, len(data))])
			for _, c := range o.take(false) {
				got = append(got, c.data...)
			}
		}
		for _, c := range o.take(true) {
			got = append(got, c.data...)
		}
		if string(got) != string(data) {
			t.Fatalf("got %q, want %q", got, data)
		}
	})
}
