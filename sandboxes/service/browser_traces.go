package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandgate/sandgate/sandboxes"
)

// Browser execution evidence (Bay's trace_ref and learn): a browser run is recorded in the sandbox's history like
// any execution, and, when the caller asks for its trace (include_trace) or to learn from it (learn), its steps are
// kept as a trace under a blob:blob-... ref, fetched back through the sandbox (BrowserTrace). Bay's answer carries the
// ref only for include_trace; learn alone keeps it on the history entry (payload_ref) and marks the entry pending
// for the learning pass, which turns runs into skill candidates (skills_learn.go).

// TraceRefPrefix starts every trace ref (Bay's payload ref scheme).
const TraceRefPrefix = "blob:"

// Learning marks of a history entry (Bay's learn_status).
const (
	LearnPending = sandboxes.LearnStatusPending
	LearnSkipped = "skipped"
)

// Trace kinds, Bay's.
const (
	TraceKindExec  = "browser_exec_trace"
	TraceKindBatch = "browser_batch_trace"
)

// BrowserStep is one browser command of a run, as it ran.
type BrowserStep struct {
	Cmd      string `json:"cmd"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	// DurationMS is the step's time; a single exec's trace has none (Bay's shape).
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

// BrowserRun is one browser exec (Batch false, one step) or exec_batch, for the history and its trace.
type BrowserRun struct {
	Batch bool
	// Commands are the commands asked for; Steps those that ran (a batch stops at the first failure when asked to).
	Commands []string
	Steps    []BrowserStep
	Success  bool
	Elapsed  time.Duration
}

// BrowserEvidence is what a caller asks to keep of a run.
type BrowserEvidence struct {
	ExecMeta
	Learn        bool // keep the trace and mark the entry for learning
	IncludeTrace bool // keep the trace and answer its ref
}

// traceStep is a step as a trace holds it (Bay's individual_action).
type traceStep struct {
	Kind      string `json:"kind"`
	Cmd       string `json:"cmd"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	StepIndex int    `json:"step_index"`
	// DurationMS is present in a batch's steps only.
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

type traceDoc struct {
	Kind           string      `json:"kind"`
	Steps          []traceStep `json:"steps"`
	TotalSteps     *int        `json:"total_steps,omitempty"`
	CompletedSteps *int        `json:"completed_steps,omitempty"`
	Success        *bool       `json:"success,omitempty"`
	DurationMS     *int64      `json:"duration_ms,omitempty"`
	// Truncated is ours: some step text (or, past that, some steps) was cut to keep the trace within MaxTraceBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// BuildBrowserTrace encodes a run as Bay's trace (browser_exec_trace or browser_batch_trace), at most
// sandboxes.MaxTraceBytes: the steps' text is the tenant's (a page, a script's output), so when the whole would be
// larger each text field is cut (on a UTF-8 boundary) to a shrinking share until it fits, and past that trailing
// steps are dropped; truncated says so. The result is always a JSON object.
func BuildBrowserTrace(run BrowserRun) []byte {
	steps := run.Steps
	// A step's envelope alone takes more than traceStepMin bytes, so more steps than this can never fit; and when the
	// raw text alone is over the bound, start from each field's share instead of encoding the whole first.
	if len(steps) > sandboxes.MaxTraceBytes/traceStepMin {
		steps = steps[:sandboxes.MaxTraceBytes/traceStepMin]
	}
	raw := 0
	for _, s := range steps {
		raw += len(s.Cmd) + len(s.Stdout) + len(s.Stderr)
	}
	fieldCap := -1 // no cut
	if raw > sandboxes.MaxTraceBytes {
		fieldCap = sandboxes.MaxTraceBytes / (3*len(steps) + 1)
	}
	for {
		doc := traceDoc{Kind: TraceKindExec, Steps: make([]traceStep, 0, len(steps)), Truncated: fieldCap >= 0 || len(steps) < len(run.Steps)}
		for i, s := range steps {
			ts := traceStep{Kind: "individual_action", Cmd: cutText(s.Cmd, fieldCap), Stdout: cutText(s.Stdout, fieldCap),
				Stderr: cutText(s.Stderr, fieldCap), ExitCode: s.ExitCode, StepIndex: i}
			if run.Batch {
				d := int64(0)
				if s.DurationMS != nil {
					d = *s.DurationMS
				}
				ts.DurationMS = &d
			}
			doc.Steps = append(doc.Steps, ts)
		}
		if run.Batch {
			total, completed, ok, ms := len(run.Commands), len(run.Steps), run.Success, run.Elapsed.Milliseconds()
			doc.Kind, doc.TotalSteps, doc.CompletedSteps, doc.Success, doc.DurationMS = TraceKindBatch, &total, &completed, &ok, &ms
		}
		b, err := json.Marshal(doc)
		if err == nil && len(b) <= sandboxes.MaxTraceBytes {
			return b
		}
		switch {
		case fieldCap < 0:
			fieldCap = sandboxes.MaxTraceBytes / (3*len(steps) + 1)
		case fieldCap > 64:
			fieldCap /= 2
		case len(steps) > 0:
			steps = steps[:len(steps)/2]
		default: // nothing left to cut: the envelope alone always fits
			return b
		}
	}
}

// traceStepMin is less than any encoded step takes.
const traceStepMin = 64

// cutText keeps at most n bytes of s (n < 0: all), on a UTF-8 boundary.
func cutText(s string, n int) string {
	if n < 0 || len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ParseTraceRef checks a trace ref a caller names: Bay's blob: scheme, else validation_error. A well-formed ref
// that names nothing is not_found at the lookup.
func ParseTraceRef(ref string) error {
	if !strings.HasPrefix(ref, TraceRefPrefix) {
		return Errorf(CodeValidation, "Unsupported payload_ref: %s", clip(ref))
	}
	if ref == TraceRefPrefix {
		return Errorf(CodeValidation, "Invalid payload_ref: %s", ref)
	}
	return nil
}

// clip bounds a caller's string echoed in an error message.
func clip(s string) string {
	if len(s) > 128 {
		return cutText(s, 128) + "..."
	}
	return s
}

// RecordBrowser records a browser run in the history of sandbox id (which p has just used) and, when ev asks for
// it, keeps its trace. It answers the execution id and the ref to answer (ev.IncludeTrace only; learn alone keeps
// the ref on the entry). A history that cannot be written loses the record, as Record does, never the run's answer.
func (s *Service) RecordBrowser(ctx context.Context, id string, run BrowserRun, ev BrowserEvidence) (string, *string) {
	var out, errs []string
	for _, st := range run.Steps {
		if o := strings.TrimSpace(st.Stdout); o != "" {
			out = append(out, o)
		}
		if e := strings.TrimSpace(st.Stderr); e != "" {
			errs = append(errs, e)
		}
	}
	e := &sandboxes.HistoryEntry{
		ID: NewID("exec-"), SandboxID: id, ExecType: "browser", Code: strings.Join(run.Commands, "\n"), Success: run.Success,
		ExecutionTimeMS: run.Elapsed.Milliseconds(), Output: strPtr(strings.Join(out, "\n")), Error: EmptyToNil(strings.Join(errs, "\n")),
		Description: ev.Description, Tags: ev.Tags, LearnEnabled: ev.Learn, LearnStatus: strPtr(LearnSkipped), CreatedAt: s.cfg.Now().UTC(),
	}
	if run.Batch {
		e.ExecType = "browser_batch"
	} else if len(run.Steps) == 1 {
		e.Output, e.Error = strPtr(run.Steps[0].Stdout), EmptyToNil(run.Steps[0].Stderr)
	}
	if ev.Learn {
		e.LearnStatus = strPtr(LearnPending)
	}
	var answer *string
	if ev.Learn || ev.IncludeTrace {
		ref := TraceRefPrefix + NewID("blob-")
		e.PayloadRef, e.Trace = &ref, BuildBrowserTrace(run)
		if ev.IncludeTrace {
			answer = &ref
		}
	}
	if s.cfg.History == nil {
		return e.ID, nil // nothing is kept, so no ref is answered that could not be fetched
	}
	if err := s.cfg.History.AddHistory(e); err != nil { // queued; stored in the background
		s.cfg.Logger.Warn("recording browser execution", "sandbox", id, "error", err)
		return e.ID, nil
	}
	if ev.Learn {
		s.kickLearning()
	}
	return e.ID, answer
}

// BrowserTrace returns a trace of sandbox id, which p must be able to see, by its ref: validation_error for a ref
// that is not Bay's blob: scheme, not_found for one the sandbox has no trace under (another sandbox's included).
func (s *Service) BrowserTrace(ctx context.Context, p Principal, id, ref string) (json.RawMessage, error) {
	if _, err := s.Visible(ctx, p, id); err != nil {
		return nil, err
	}
	if err := ParseTraceRef(ref); err != nil {
		return nil, err
	}
	if s.cfg.History == nil {
		return nil, Errorf(CodeNotFound, "Artifact blob not found: %s", clip(ref))
	}
	b, ok, err := s.cfg.History.Trace(id, ref)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	if !ok {
		return nil, Errorf(CodeNotFound, "Artifact blob not found: %s", clip(strings.TrimPrefix(ref, TraceRefPrefix)))
	}
	return json.RawMessage(b), nil
}

// TracePayload returns a trace by its ref alone, for a caller who may see the sandbox it belongs to (Bay serves
// traces as payloads too: GET /v1/skills/payloads/{ref}); not_found otherwise.
func (s *Service) TracePayload(ctx context.Context, p Principal, ref string) (json.RawMessage, error) {
	if err := ParseTraceRef(ref); err != nil {
		return nil, err
	}
	if s.cfg.History == nil {
		return nil, Errorf(CodeNotFound, "Artifact blob not found: %s", clip(ref))
	}
	id, ok, err := s.cfg.History.TraceSandbox(ref)
	if err != nil {
		return nil, fmt.Errorf("finding trace: %w", err)
	}
	if !ok {
		return nil, Errorf(CodeNotFound, "Artifact blob not found: %s", clip(strings.TrimPrefix(ref, TraceRefPrefix)))
	}
	if _, err := s.Visible(ctx, p, id); err != nil {
		if AsError(err).Code == CodeNotFound {
			return nil, Errorf(CodeNotFound, "Artifact blob not found: %s", clip(strings.TrimPrefix(ref, TraceRefPrefix)))
		}
		return nil, err
	}
	return s.BrowserTrace(ctx, p, id, ref)
}
