package codeinterp

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

func errCode(err error) string {
	var e *agentapi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

func TestParseExecute(t *testing.T) {
	tests := []struct {
		name, body, code, lang string
	}{
		{name: "code only runs in python", body: `{"code":"1"}`, lang: LangPython},
		{name: "js alias", body: `{"code":"1","language":"js"}`, lang: LangJavaScript},
		{name: "ts alias", body: `{"code":"1","language":"TS"}`, lang: LangTypeScript},
		{name: "r", body: `{"code":"1","language":"r"}`, lang: LangR},
		{name: "context", body: `{"code":"1","context_id":"0123abcd-ef"}`},
		{name: "env", body: `{"code":"1","env_vars":{"A":"b"}}`, lang: LangPython},
		{name: "context and language", body: `{"code":"1","context_id":"x","language":"python"}`, code: agentapi.CodeInvalidRequest},
		{name: "unknown language", body: `{"code":"1","language":"java"}`, code: agentapi.CodeInvalidRequest},
		{name: "bad context id", body: `{"code":"1","context_id":"../x"}`, code: agentapi.CodeInvalidRequest},
		{name: "env name with =", body: `{"code":"1","env_vars":{"A=B":"c"}}`, code: agentapi.CodeInvalidRequest},
		{name: "env value with NUL", body: `{"code":"1","env_vars":{"A":"\u0000"}}`, code: agentapi.CodeInvalidRequest},
		{name: "env not strings", body: `{"code":"1","env_vars":{"A":1}}`, code: agentapi.CodeInvalidRequest},
		{name: "not JSON", body: `code=1`, code: agentapi.CodeInvalidRequest},
		{name: "code too large", body: `{"code":"` + strings.Repeat("x", MaxCodeBytes+1) + `"}`, code: agentapi.CodeTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseExecute([]byte(tc.body))
			if got := errCode(err); got != tc.code {
				t.Fatalf("error %v, want code %q", err, tc.code)
			}
			if err == nil && req.Language != tc.lang {
				t.Fatalf("language %q, want %q", req.Language, tc.lang)
			}
		})
	}
}

func TestParseCreateContext(t *testing.T) {
	tests := []struct {
		name, body, lang, cwd, code string
	}{
		{name: "empty body", body: ``, lang: LangPython, cwd: DefaultCwd},
		{name: "defaults", body: `{}`, lang: LangPython, cwd: DefaultCwd},
		{name: "js and cwd cleaned", body: `{"language":"javascript","cwd":"/home/user/a/../b/"}`, lang: LangJavaScript, cwd: "/home/user/b"},
		{name: "relative cwd", body: `{"cwd":"work"}`, code: agentapi.CodeInvalidPath},
		{name: "unknown language", body: `{"language":"bash"}`, code: agentapi.CodeInvalidRequest},
		{name: "not JSON", body: `[`, code: agentapi.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseCreateContext([]byte(tc.body))
			if got := errCode(err); got != tc.code {
				t.Fatalf("error %v, want code %q", err, tc.code)
			}
			if err == nil && (req.Language != tc.lang || req.Cwd != tc.cwd) {
				t.Fatalf("got %+v", req)
			}
		})
	}
}

func TestCheckContextID(t *testing.T) {
	for id, ok := range map[string]bool{
		"0123456789abcdef0123456789abcdef":     true,
		"6f1c2e4a-9b7d-4c3e-8f2a-1b2c3d4e5f60": true,
		"":                                     false,
		strings.Repeat("a", maxIDLen+1):        false,
		"a/b":                                  false,
		"a b":                                  false,
		"é":                                    false,
	} {
		if err := CheckContextID(id); (err == nil) != ok {
			t.Errorf("CheckContextID(%q) = %v, want ok %v", id, err, ok)
		}
	}
}

func TestParseEnvHeader(t *testing.T) {
	env, err := ParseEnvHeader(`{"FOO":"bar","EMPTY":""}`)
	if err != nil || env["FOO"] != "bar" || len(env) != 2 {
		t.Fatalf("%v %v", env, err)
	}
	if env, err := ParseEnvHeader(""); err != nil || env != nil {
		t.Fatalf("absent header: %v %v", env, err)
	}
	for _, bad := range []string{`[]`, `{"A":1}`, `{"":"x"}`, `{"A":"\u0000"}`, `nope`} {
		if _, err := ParseEnvHeader(bad); errCode(err) != agentapi.CodeInvalidRequest {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestEnviron(t *testing.T) {
	got := environ([]string{"PATH=/bin", "FOO=old", "KEEP=1"}, map[string]string{"FOO": "new", "A": "x"})
	want := "PATH=/bin KEEP=1 A=x FOO=new"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}
