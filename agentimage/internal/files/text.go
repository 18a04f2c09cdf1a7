package files

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// maxEditBytes caps the files edit loads whole.
const maxEditBytes = 16 << 20

// Read returns lines [Offset, Offset+Limit) of a text file, cutting very long lines, with a hint on how to go on.
func (s *Service) Read(req agentapi.ReadRequest) (agentapi.ReadResult, error) {
	f, _, err := s.Open(req.Path)
	if err != nil {
		return agentapi.ReadResult{}, err
	}
	defer f.Close()
	rel := s.rel(f.Name())
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(8 << 10); bytes.IndexByte(head, 0) >= 0 {
		return agentapi.ReadResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest,
			"%s looks binary (it has NUL bytes): download it with GET /v1/files instead", rel).With("path", rel)
	}
	start := max(req.Offset, 1)
	limit := req.Limit
	if limit <= 0 {
		limit = agentapi.DefaultReadLines
	}
	res := agentapi.ReadResult{Path: rel, StartLine: start, EndLine: start - 1}
	var out strings.Builder
	cut := false
	line := 0
	for {
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			if err != io.EOF {
				return res, s.fsError("reading", f.Name(), err)
			}
			break
		}
		line++
		if line < start {
			continue
		}
		if line >= start+limit || out.Len() >= agentapi.MaxReadResultBytes {
			res.Truncated = true
			continue // keep counting lines for total_lines
		}
		text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
		if len(text) > agentapi.MaxReadLineBytes {
			text = truncateUTF8(text, agentapi.MaxReadLineBytes) + " …[line cut]"
			cut = true
		}
		out.WriteString(text)
		out.WriteByte('\n')
		res.EndLine = line
	}
	res.TotalLines = line
	res.Content = out.String()
	switch {
	case res.Truncated:
		res.Hint = fmt.Sprintf("showing lines %d-%d of %d; read on with offset=%d", res.StartLine, res.EndLine, res.TotalLines, res.EndLine+1)
	case start > line && line > 0:
		res.Hint = fmt.Sprintf("the file has only %d lines", line)
	}
	if cut {
		res.Truncated = true
		res.Hint = strings.TrimSpace(res.Hint + fmt.Sprintf(" (lines longer than %d bytes were cut; download the file for them)", agentapi.MaxReadLineBytes))
	}
	return res, nil
}

func truncateUTF8(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Write writes content (utf8 or base64) atomically; empty content makes an empty file.
func (s *Service) Write(ctx context.Context, req agentapi.WriteRequest) (agentapi.WriteResult, error) {
	data, err := agentapi.DecodeData(req.Content, req.Encoding)
	if err != nil {
		return agentapi.WriteResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "content: %v", err)
	}
	mode, err := ParseMode(req.Mode)
	if err != nil {
		return agentapi.WriteResult{}, err
	}
	return s.WriteFile(ctx, req.Path, bytes.NewReader(data), WriteOptions{Mode: mode, IfMatch: req.IfMatch, Size: int64(len(data))})
}

// Edit replaces Old by New in a text file. Old must be found, and found once unless ReplaceAll; the write is
// atomic and refused if the file changed since it was read.
func (s *Service) Edit(ctx context.Context, req agentapi.EditRequest) (agentapi.EditResult, error) {
	if req.Old == "" {
		return agentapi.EditResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "old must not be empty (use write to create or replace a file)")
	}
	if req.Old == req.New {
		return agentapi.EditResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "old and new are the same")
	}
	f, fi, err := s.Open(req.Path)
	if err != nil {
		return agentapi.EditResult{}, err
	}
	rel := s.rel(f.Name())
	if fi.Size() > maxEditBytes {
		f.Close()
		return agentapi.EditResult{}, agentapi.Errorf(agentapi.CodeTooLarge, "%s is larger than %d bytes; edit it another way", rel, maxEditBytes)
	}
	content, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return agentapi.EditResult{}, s.fsError("reading", f.Name(), err)
	}
	n := strings.Count(string(content), req.Old)
	switch {
	case n == 0:
		return agentapi.EditResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest, "old text not found in %s", rel).With("path", rel).With("occurrences", 0)
	case n > 1 && !req.ReplaceAll:
		return agentapi.EditResult{}, agentapi.Errorf(agentapi.CodeInvalidRequest,
			"old text occurs %d times in %s: add context to make it unique, or set replace_all", n, rel).With("path", rel).With("occurrences", n)
	}
	updated := strings.Replace(string(content), req.Old, req.New, max(1, boolInt(req.ReplaceAll)*n))
	res, err := s.WriteFile(ctx, req.Path, strings.NewReader(updated), WriteOptions{IfMatch: ETag(fi), Size: int64(len(updated))})
	if err != nil {
		return agentapi.EditResult{}, err
	}
	return agentapi.EditResult{Path: res.Path, Replacements: max(1, boolInt(req.ReplaceAll)*n), ETag: res.ETag}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
