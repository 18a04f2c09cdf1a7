package codeinterp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// DefaultCwd is E2B's working directory for code contexts, the home of E2B's user. Our sandboxes have no such
// user: where the image has no /home/user, it is the workspace (Config.Workspace), so files written there persist
// and snapshot like every other workspace file.
const DefaultCwd = "/home/user"

// codeContext is one E2B code context: a language and a working directory on a kernel of its own.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`

	run runner
	// mu serialises this context's executions, so its count follows them.
	mu    sync.Mutex
	count int
}

// contexts holds the sandbox's code contexts, bounded by Config.MaxContexts.
type contexts struct {
	mu    sync.Mutex
	byID  map[string]*codeContext
	order []string
	// defaults are the contexts an /execute without context_id runs in, by language.
	defaults map[string]string
}

func newContexts() *contexts {
	return &contexts{byID: map[string]*codeContext{}, defaults: map[string]string{}}
}

// hostDir maps a context's cwd onto this sandbox: E2B's /home/user is the workspace when the image has no such
// directory. The directory must exist.
func (s *Service) hostDir(cwd string) (string, error) {
	dir := cwd
	if (cwd == DefaultCwd || strings.HasPrefix(cwd, DefaultCwd+"/")) && s.cfg.Workspace != "" {
		if st, err := os.Stat(DefaultCwd); err != nil || !st.IsDir() {
			dir = path.Join(s.cfg.Workspace, strings.TrimPrefix(cwd, DefaultCwd))
		}
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return "", agentapi.Errorf(agentapi.CodeInvalidPath, "cwd %s is not a directory in this sandbox", cwd)
	}
	return dir, nil
}

// available refuses a language whose interpreter this image lacks.
func (s *Service) available(lang string) error {
	bin, why := s.cfg.Python, "python"
	switch lang {
	case LangJavaScript, LangTypeScript:
		bin, why = s.cfg.Node, "node is not installed in this sandbox image (use an image with Node.js)"
	case LangR:
		bin, why = s.cfg.Rscript, "this sandbox image has no R (use the sandgate/sandbox:r image)"
	default:
		why = "python is not installed in this sandbox image"
	}
	if _, err := exec.LookPath(bin); err != nil {
		return agentapi.Errorf(agentapi.CodeNotSupported, "language %s: %s", lang, why)
	}
	return nil
}

// create makes a context; sandboxEnv (the gateway's header) is the environment of its kernel.
func (s *Service) create(lang, cwd string, sandboxEnv map[string]string) (*codeContext, error) {
	if err := s.available(lang); err != nil {
		return nil, err
	}
	dir, err := s.hostDir(cwd)
	if err != nil {
		return nil, err
	}
	c := &codeContext{ID: newID(), Language: lang, Cwd: cwd}
	s.ctxs.mu.Lock()
	defer s.ctxs.mu.Unlock()
	if len(s.ctxs.byID) >= s.cfg.MaxContexts {
		return nil, agentapi.Errorf(agentapi.CodeConflict, "this sandbox has %d code contexts, the maximum: delete one first", s.cfg.MaxContexts)
	}
	c.run = s.newRunner(lang, dir, environ(s.cfg.Env, sandboxEnv))
	s.ctxs.byID[c.ID] = c
	s.ctxs.order = append(s.ctxs.order, c.ID)
	return c, nil
}

// defaultFor returns the default context of lang, creating it on first use (upstream creates Python's and
// JavaScript's at start; ours start their kernel on first execution either way).
func (s *Service) defaultFor(lang string, sandboxEnv map[string]string) (*codeContext, error) {
	s.ctxs.mu.Lock()
	if id, ok := s.ctxs.defaults[lang]; ok {
		if c := s.ctxs.byID[id]; c != nil {
			s.ctxs.mu.Unlock()
			return c, nil
		}
	}
	s.ctxs.mu.Unlock()
	s.defaultMu.Lock() // one creator per language at a time: two first executions share one context
	defer s.defaultMu.Unlock()
	s.ctxs.mu.Lock()
	if c := s.ctxs.byID[s.ctxs.defaults[lang]]; c != nil {
		s.ctxs.mu.Unlock()
		return c, nil
	}
	s.ctxs.mu.Unlock()
	c, err := s.create(lang, DefaultCwd, sandboxEnv)
	if err != nil {
		return nil, err
	}
	s.ctxs.mu.Lock()
	s.ctxs.defaults[lang] = c.ID
	s.ctxs.mu.Unlock()
	return c, nil
}

func (s *Service) get(id string) (*codeContext, error) {
	s.ctxs.mu.Lock()
	defer s.ctxs.mu.Unlock()
	if c := s.ctxs.byID[id]; c != nil {
		return c, nil
	}
	return nil, agentapi.Errorf(agentapi.CodeNotFound, "context %s not found", id)
}

func (s *Service) list() []*codeContext {
	s.ctxs.mu.Lock()
	defer s.ctxs.mu.Unlock()
	out := make([]*codeContext, 0, len(s.ctxs.order))
	for _, id := range s.ctxs.order {
		out = append(out, s.ctxs.byID[id])
	}
	return out
}

// remove deletes a context and stops its kernel (also in the middle of an execution, which then ends with the
// kernel's error).
func (s *Service) remove(id string) error {
	s.ctxs.mu.Lock()
	c := s.ctxs.byID[id]
	if c != nil {
		delete(s.ctxs.byID, id)
		s.ctxs.order = deleteString(s.ctxs.order, id)
		for lang, d := range s.ctxs.defaults {
			if d == id {
				delete(s.ctxs.defaults, lang)
			}
		}
	}
	s.ctxs.mu.Unlock()
	if c == nil {
		return agentapi.Errorf(agentapi.CodeNotFound, "context %s not found", id)
	}
	c.run.close()
	return nil
}

// restart gives the context a fresh kernel, with its variables gone and its count back at zero.
func (s *Service) restart(ctx context.Context, id string) error {
	c, err := s.get(id)
	if err != nil {
		return err
	}
	if err := c.run.restart(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.count = 0
	c.mu.Unlock()
	return nil
}

// Close stops every context's kernel.
func (s *Service) Close() {
	for _, c := range s.list() {
		_ = s.remove(c.ID)
	}
}

func deleteString(list []string, v string) []string {
	out := list[:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// newID is a context id: 128 random bits, as upstream's UUIDs carry.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
