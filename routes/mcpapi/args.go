package mcpapi

import (
	"regexp"
	"strings"
	"time"

	"github.com/sandgate/sandgate/sandboxes"
	"github.com/sandgate/sandgate/sandboxes/service"
)

// Tool arguments. The JSON schema each tool advertises is inferred from these types (the jsonschema tags are the
// descriptions a model reads); validate checks what a schema cannot say. Bounds follow the REST API's.

const (
	defaultTimeoutSec = 30
	maxTimeoutSec     = 300
	maxLongTimeoutSec = 86400
	maxTicketTTLSec   = 3600
)

var sandboxIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func invalid(format string, args ...any) error {
	return &service.Error{Code: service.CodeValidation, Message: sprintf(format, args...)}
}

func checkID(id string) error {
	if !sandboxIDPattern.MatchString(id) {
		return invalid("sandbox_id %q is not a sandbox id (create_sandbox and list_sandboxes return them)", id)
	}
	return nil
}

// timeout reads an optional timeout in seconds: 0 is def, otherwise 1..max.
func timeout(sec, def, max int) (time.Duration, error) {
	if sec == 0 {
		sec = def
	}
	if sec < 1 || sec > max {
		return 0, invalid("timeout_seconds must be between 1 and %d", max)
	}
	return time.Duration(sec) * time.Second, nil
}

type noArgs struct{}

func (noArgs) validate() error { return nil }

type sandboxArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id of the sandbox, as create_sandbox or list_sandboxes returned it"`
}

func (a sandboxArgs) validate() error { return checkID(a.SandboxID) }

type createArgs struct {
	Profile    string `json:"profile,omitempty" jsonschema:"profile to create from (list_profiles names them); default python-default"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" jsonschema:"hard lifetime in seconds; the sandbox and its workspace are deleted after it (default: the profile's)"`
	// Dependencies are installed when the sandbox starts.
	Dependencies *sandboxes.Dependencies `json:"dependencies,omitempty" jsonschema:"packages to install at start: {python: {name: version}, node: {name: range}, r: {name: version}}; use \"\" or \"*\" for any version"`
}

func (a createArgs) validate() error {
	if a.TTLSeconds < 0 {
		return invalid("ttl_seconds must not be negative")
	}
	if a.Profile != "" && !sandboxIDPattern.MatchString(a.Profile) {
		return invalid("profile %q is not a profile id", a.Profile)
	}
	return nil
}

type listArgs struct {
	Status string `json:"status,omitempty" jsonschema:"only sandboxes in this status: idle, starting, ready, failed or expired"`
}

func (a listArgs) validate() error {
	switch a.Status {
	case "", "idle", "starting", "ready", "failed", "expired":
		return nil
	}
	return invalid("status must be idle, starting, ready, failed or expired, not %q", a.Status)
}

type runCodeArgs struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Language       string `json:"language,omitempty" jsonschema:"python (default) or node; each language has one persistent kernel per sandbox, so variables and imports survive between calls"`
	Code           string `json:"code" jsonschema:"the code; the value of the last expression is returned, matplotlib figures come back as images"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"limit in seconds (default 30, at most 300)"`
}

func (a runCodeArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	switch a.Language {
	case "", service.LangPython, service.LangNode, service.LangR:
	default:
		return invalid("language must be python, node or r, not %q", a.Language)
	}
	if strings.TrimSpace(a.Code) == "" {
		return invalid("code must not be empty")
	}
	_, err := timeout(a.TimeoutSeconds, defaultTimeoutSec, maxTimeoutSec)
	return err
}

func (a runCodeArgs) language() string {
	if a.Language == "" {
		return service.LangPython
	}
	return a.Language
}

type commandArgs struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Command        string `json:"command" jsonschema:"shell command, run by bash in the workspace"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"working directory relative to the workspace (default: the workspace root)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"the command is killed after this many seconds (default 30, at most 300; run_long_command allows 86400)"`
}

func (a commandArgs) check(max int) error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	if strings.TrimSpace(a.Command) == "" {
		return invalid("command must not be empty")
	}
	_, err := timeout(a.TimeoutSeconds, defaultTimeoutSec, max)
	return err
}

func (a commandArgs) validate() error { return a.check(maxTimeoutSec) }

func (a commandArgs) params(max int) service.ShellParams {
	d, _ := timeout(a.TimeoutSeconds, defaultTimeoutSec, max) // validated
	sp := service.ShellParams{Command: a.Command, Timeout: d}
	if a.Cwd != "" {
		cwd := a.Cwd
		sp.Cwd = &cwd
	}
	return sp
}

// longCommandArgs is run_long_command's: the same fields, a longer bound.
type longCommandArgs commandArgs

func (a longCommandArgs) validate() error { return commandArgs(a).check(maxLongTimeoutSec) }

type pathArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Path      string `json:"path" jsonschema:"path relative to the workspace"`
}

func (a pathArgs) validate() error { return checkID(a.SandboxID) }

type listFilesArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Path      string `json:"path,omitempty" jsonschema:"directory relative to the workspace (default: the workspace root)"`
}

func (a listFilesArgs) validate() error { return checkID(a.SandboxID) }

type writeArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Path      string `json:"path" jsonschema:"file path relative to the workspace; parent directories are created"`
	Content   string `json:"content" jsonschema:"the whole new content of the file (text)"`
}

func (a writeArgs) validate() error { return checkID(a.SandboxID) }

type editArgs struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Path       string `json:"path" jsonschema:"file path relative to the workspace"`
	OldString  string `json:"old_string" jsonschema:"exact text to replace; it must occur exactly once unless replace_all"`
	NewString  string `json:"new_string" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence"`
}

func (a editArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	if a.OldString == "" {
		return invalid("old_string must not be empty")
	}
	return nil
}

type searchArgs struct {
	SandboxID       string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	Pattern         string `json:"pattern" jsonschema:"regular expression (ripgrep syntax)"`
	Path            string `json:"path,omitempty" jsonschema:"file or directory to search, relative to the workspace (default: all of it)"`
	Glob            string `json:"glob,omitempty" jsonschema:"only files matching this glob, e.g. *.py"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty"`
	Limit           int    `json:"limit,omitempty" jsonschema:"most matches returned (default 500)"`
}

func (a searchArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	if a.Pattern == "" {
		return invalid("pattern must not be empty")
	}
	if a.Limit < 0 || a.Limit > 10000 {
		return invalid("limit must be between 0 and 10000")
	}
	return nil
}

type exportArgs struct {
	SandboxID string   `json:"sandbox_id" jsonschema:"id of the sandbox that holds the files"`
	Paths     []string `json:"paths" jsonschema:"workspace paths your other sandboxes may then import (nothing is copied now)"`
}

func (a exportArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	if len(a.Paths) == 0 || len(a.Paths) > 1000 {
		return invalid("paths must list 1 to 1000 workspace paths")
	}
	return nil
}

type importArgs struct {
	SandboxID   string `json:"sandbox_id" jsonschema:"id of the sandbox to copy the file into"`
	FromSandbox string `json:"from_sandbox,omitempty" jsonschema:"id of another of your sandboxes that exported path (give it with path, or give url)"`
	Path        string `json:"path,omitempty" jsonschema:"exported path in from_sandbox"`
	URL         string `json:"url,omitempty" jsonschema:"a public http(s) URL to download instead"`
	Destination string `json:"destination,omitempty" jsonschema:"workspace path to write (default: the source's file name)"`
}

func (a importArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	fromSandbox := a.FromSandbox != "" || a.Path != ""
	if fromSandbox == (a.URL != "") {
		return invalid("give either from_sandbox and path, or url")
	}
	if fromSandbox {
		if err := checkID(a.FromSandbox); err != nil {
			return invalid("from_sandbox: %s", err.(*service.Error).Message)
		}
	}
	return nil
}

// views are what open_in_browser opens, and the ticket scope of each.
var views = map[string]string{"terminal": "terminal", "desktop": "vnc", "app": "app"}

type openArgs struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"id of the sandbox"`
	View       string `json:"view" jsonschema:"terminal (a shell), desktop (the sandbox's screen, browser profiles) or app (the web app the sandbox serves on its app port)"`
	ReadOnly   bool   `json:"read_only,omitempty" jsonschema:"let the person watch but not type or click"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" jsonschema:"how long the link may wait to be opened (default 300, at most 3600); it works once"`
}

func (a openArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	if _, ok := views[a.View]; !ok {
		return invalid("view must be terminal, desktop or app, not %q", a.View)
	}
	if a.TTLSeconds < 0 || a.TTLSeconds > maxTicketTTLSec {
		return invalid("ttl_seconds must be between 1 and %d", maxTicketTTLSec)
	}
	return nil
}

type navigateArgs struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"id of the sandbox (a browser profile)"`
	URL            string `json:"url" jsonschema:"absolute URL to load (http, https, about: or data:)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"default 30, at most 300"`
}

func (a navigateArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	u := strings.ToLower(a.URL)
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "about:") && !strings.HasPrefix(u, "data:") {
		return invalid("url must be an absolute http(s), about: or data: URL")
	}
	_, err := timeout(a.TimeoutSeconds, defaultTimeoutSec, maxTimeoutSec)
	return err
}

type evaluateArgs struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"id of the sandbox (a browser profile)"`
	Expression     string `json:"expression" jsonschema:"JavaScript expression evaluated in the current page; its JSON value is returned (promises are awaited)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"default 30, at most 300"`
}

func (a evaluateArgs) validate() error {
	if err := checkID(a.SandboxID); err != nil {
		return err
	}
	if strings.TrimSpace(a.Expression) == "" {
		return invalid("expression must not be empty")
	}
	_, err := timeout(a.TimeoutSeconds, defaultTimeoutSec, maxTimeoutSec)
	return err
}
