package files

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Grep searches files with ripgrep (which honours .gitignore and skips binary files).
func (s *Service) Grep(ctx context.Context, req agentapi.GrepRequest) (agentapi.GrepResult, error) {
	if req.Pattern == "" {
		return agentapi.GrepResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "pattern is required")
	}
	abs, err := s.root.Resolve(req.Path)
	if err != nil {
		return agentapi.GrepResult{}, err
	}
	rg, err := exec.LookPath("rg")
	if err != nil {
		return agentapi.GrepResult{}, agentapi.Errorf(agentapi.CodeNotSupported, "ripgrep (rg) is not installed in this sandbox")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 500
	}
	maxLine := req.MaxLineLength
	if maxLine <= 0 {
		maxLine = 500
	}
	args := []string{"--json", "--no-config"}
	if req.CaseInsensitive {
		args = append(args, "-i")
	}
	if req.ContextLines > 0 {
		args = append(args, "-C", strconv.Itoa(min(req.ContextLines, 20)))
	}
	if req.Glob != "" {
		args = append(args, "--glob", req.Glob)
	}
	args = append(args, "-e", req.Pattern, "--", abs)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rg, args...)
	cmd.Dir = s.root.Dir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return agentapi.GrepResult{}, fmt.Errorf("starting rg: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return agentapi.GrepResult{}, fmt.Errorf("starting rg: %w", err)
	}
	res := agentapi.GrepResult{Matches: []agentapi.GrepMatch{}}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			Type string `json:"type"`
			Data struct {
				Path       struct{ Text string } `json:"path"`
				Lines      struct{ Text string } `json:"lines"`
				LineNumber int                   `json:"line_number"`
			} `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || (msg.Type != "match" && msg.Type != "context") {
			continue
		}
		if len(res.Matches) >= limit {
			res.Truncated = true
			cancel()
			break
		}
		text := strings.TrimRight(msg.Data.Lines.Text, "\r\n")
		if len(text) > maxLine {
			text = truncateUTF8(text, maxLine) + " …"
		}
		p := msg.Data.Path.Text
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.root.Dir(), p)
		}
		res.Matches = append(res.Matches, agentapi.GrepMatch{Path: s.rel(p), Line: msg.Data.LineNumber, Text: text, Context: msg.Type == "context"})
	}
	err = cmd.Wait()
	if res.Truncated {
		return res, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case 1: // no match
			return res, nil
		case 2:
			if len(res.Matches) > 0 { // some files unreadable; matches elsewhere stand
				return res, nil
			}
			return res, agentapi.Errorf(agentapi.CodeInvalidRequest, "rg: %s", strings.TrimSpace(stderr.String()))
		}
	}
	if ctx.Err() != nil {
		return res, agentapi.Errorf(agentapi.CodeTimeout, "grep took longer than 60s; narrow path or glob")
	}
	if err != nil {
		return res, fmt.Errorf("running rg: %w", err)
	}
	return res, nil
}

// Glob finds paths under Path matching Pattern: `/`-separated segments with *, ?, [...] within a segment and ** for
// any number of directories. Symlinked directories are not followed.
func (s *Service) Glob(ctx context.Context, req agentapi.GlobRequest) (agentapi.GlobResult, error) {
	pattern := strings.TrimPrefix(filepath.ToSlash(req.Pattern), "./")
	if pattern == "" {
		return agentapi.GlobResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "pattern is required")
	}
	if strings.HasPrefix(pattern, "/") || strings.Contains("/"+pattern+"/", "/../") {
		return agentapi.GlobResult{}, agentapi.Errorf(agentapi.CodeInvalidPath, "pattern %q must be relative and stay below path", req.Pattern)
	}
	segs := strings.Split(pattern, "/")
	for _, seg := range segs {
		if _, err := path.Match(seg, ""); err != nil {
			return agentapi.GlobResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "pattern %q: %v", req.Pattern, err)
		}
	}
	base, err := s.root.Resolve(req.Path)
	if err != nil {
		return agentapi.GlobResult{}, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 1000
	}
	res := agentapi.GlobResult{Paths: []string{}}
	err = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == base {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if matchSegments(segs, parts) {
			if len(res.Paths) >= limit {
				res.Truncated = true
				return filepath.SkipAll
			}
			res.Paths = append(res.Paths, s.rel(p))
		}
		if d.IsDir() && !couldMatchBelow(segs, parts) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return res, agentapi.Errorf(agentapi.CodeTimeout, "glob stopped: %v", err)
	}
	sort.Strings(res.Paths)
	return res, nil
}

// matchSegments matches path segments against pattern segments, ** matching zero or more segments.
func matchSegments(pat, parts []string) bool {
	if len(pat) == 0 {
		return len(parts) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if matchSegments(pat[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], parts[0])
	return ok && matchSegments(pat[1:], parts[1:])
}

// couldMatchBelow reports whether some path under the directory parts could still match pat.
func couldMatchBelow(pat, parts []string) bool {
	if len(parts) == 0 {
		return len(pat) > 0
	}
	if len(pat) == 0 {
		return false
	}
	if pat[0] == "**" {
		return true
	}
	ok, _ := path.Match(pat[0], parts[0])
	return ok && couldMatchBelow(pat[1:], parts[1:])
}
