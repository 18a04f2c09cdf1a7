package codeinterp

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Limits on what a client sends.
const (
	// MaxCodeBytes bounds a cell's source (the whole /execute body is bounded a little above it).
	MaxCodeBytes = 4 << 20
	// MaxEnvVars bounds the variables of one execution or of the sandbox-wide header.
	MaxEnvVars = 512
	// maxEnvBytes bounds one variable's name plus value.
	maxEnvBytes = 128 << 10
	// maxBodyBytes bounds a request body: the code, its env and JSON's escaping.
	maxBodyBytes = 3*MaxCodeBytes + 1<<20
	// maxIDLen bounds a context id.
	maxIDLen = 64
)

// Languages: the canonical names a context reports, and the names a request may use for them.
const (
	LangPython     = "python"
	LangJavaScript = "javascript"
	LangTypeScript = "typescript"
	LangR          = "r"
)

var languageAliases = map[string]string{
	"python": LangPython, "python3": LangPython,
	"javascript": LangJavaScript, "js": LangJavaScript,
	"typescript": LangTypeScript, "ts": LangTypeScript,
	"r": LangR,
}

// canonicalLanguage maps a requested language onto ours; empty means Python, E2B's default.
func canonicalLanguage(lang string) (string, error) {
	if lang == "" {
		return LangPython, nil
	}
	if c, ok := languageAliases[strings.ToLower(strings.TrimSpace(lang))]; ok {
		return c, nil
	}
	return "", agentapi.Errorf(agentapi.CodeInvalidRequest,
		"language %q is not supported by this sandbox's code interpreter: use python, javascript (js), typescript (ts, run as JavaScript) or r (images with R)", truncate(lang, 64))
}

// ExecuteRequest is the body of POST /execute.
type ExecuteRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// ParseExecute decodes and checks a POST /execute body. Naming both a context and a language is refused, as
// upstream does; the language is returned canonical (empty when a context is named).
func ParseExecute(body []byte) (ExecuteRequest, error) {
	var req ExecuteRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, agentapi.Errorf(agentapi.CodeInvalidRequest, "decoding the execute request: %v", err)
	}
	if len(req.Code) > MaxCodeBytes {
		return req, agentapi.Errorf(agentapi.CodeTooLarge, "code is over %d bytes", MaxCodeBytes)
	}
	if req.ContextID != "" && req.Language != "" {
		return req, agentapi.Errorf(agentapi.CodeInvalidRequest, "context_id and language cannot both be given: a context has its language")
	}
	if req.ContextID != "" {
		if err := CheckContextID(req.ContextID); err != nil {
			return req, err
		}
	} else {
		lang, err := canonicalLanguage(req.Language)
		if err != nil {
			return req, err
		}
		req.Language = lang
	}
	if err := checkEnv(req.EnvVars, "env_vars"); err != nil {
		return req, err
	}
	return req, nil
}

// CreateContextRequest is the body of POST /contexts.
type CreateContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// ParseCreateContext decodes a POST /contexts body (empty means all defaults); the language is returned canonical
// and the cwd cleaned, defaulting to DefaultCwd.
func ParseCreateContext(body []byte) (CreateContextRequest, error) {
	var req CreateContextRequest
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return req, agentapi.Errorf(agentapi.CodeInvalidRequest, "decoding the context request: %v", err)
		}
	}
	lang, err := canonicalLanguage(req.Language)
	if err != nil {
		return req, err
	}
	req.Language = lang
	if req.Cwd == "" {
		req.Cwd = DefaultCwd
	}
	if !path.IsAbs(req.Cwd) || strings.ContainsRune(req.Cwd, 0) || len(req.Cwd) > 4096 {
		return req, agentapi.Errorf(agentapi.CodeInvalidPath, "cwd %q must be an absolute path", truncate(req.Cwd, 200))
	}
	req.Cwd = path.Clean(req.Cwd)
	return req, nil
}

// CheckContextID accepts the ids this server hands out, and upstream's UUIDs: letters, digits, '-' and '_'.
func CheckContextID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return agentapi.Errorf(agentapi.CodeInvalidRequest, "a context id has 1 to %d characters", maxIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return agentapi.Errorf(agentapi.CodeInvalidRequest, "context id %q has a character other than letters, digits, '-' and '_'", truncate(id, 80))
		}
	}
	return nil
}

// ParseEnvHeader decodes the sandbox-wide environment the gateway sends in agentapi.E2BEnvHeader: a JSON object of
// strings. An absent header is no variables.
func ParseEnvHeader(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(v), &env); err != nil {
		return nil, agentapi.Errorf(agentapi.CodeInvalidRequest, "decoding %s: %v", agentapi.E2BEnvHeader, err)
	}
	if err := checkEnv(env, agentapi.E2BEnvHeader); err != nil {
		return nil, err
	}
	return env, nil
}

// checkEnv refuses variables a process environment cannot hold.
func checkEnv(env map[string]string, what string) error {
	if len(env) > MaxEnvVars {
		return agentapi.Errorf(agentapi.CodeTooLarge, "%s has %d variables, over the maximum of %d", what, len(env), MaxEnvVars)
	}
	for k, v := range env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return agentapi.Errorf(agentapi.CodeInvalidRequest, "%s: %q is not a variable name", what, truncate(k, 80))
		case strings.ContainsRune(v, 0):
			return agentapi.Errorf(agentapi.CodeInvalidRequest, "%s: the value of %s holds a NUL byte", what, truncate(k, 80))
		case len(k)+len(v) > maxEnvBytes:
			return agentapi.Errorf(agentapi.CodeTooLarge, "%s: %s is over %d bytes", what, truncate(k, 80), maxEnvBytes)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return agentapi.Errorf(agentapi.CodeInvalidRequest, "%s: %s is not UTF-8", what, truncate(k, 80))
		}
	}
	return nil
}

// environ is base with env set on top, sorted for a stable order.
func environ(base []string, env map[string]string) []string {
	out := make([]string, 0, len(base)+len(env))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, over := env[name]; !over {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…", s[:n])
}
