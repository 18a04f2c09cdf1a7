package sandboxes

import (
	"context"
	"log/slog"
	"time"
)

// LaunchStepsMessage is the debug log message that carries a launch's step timings: where a cold start's time
// goes (the benchmarks read it to report the breakdown; an operator sees it with the debug level on).
const LaunchStepsMessage = "sandbox launch steps"

// launchTrace times the steps of one launch, each from the end of the one before.
type launchTrace struct {
	last  time.Time
	attrs []slog.Attr
}

func newLaunchTrace() *launchTrace { return &launchTrace{last: time.Now()} }

// step records the time since the previous step under name (milliseconds, as a float for sub-millisecond steps).
func (t *launchTrace) step(name string) {
	now := time.Now()
	t.attrs = append(t.attrs, slog.Float64(name+"_ms", float64(now.Sub(t.last).Microseconds())/1000))
	t.last = now
}

// log writes the steps recorded so far; a failed launch logs the steps it got through.
func (m *Manager) logLaunchTrace(t *launchTrace, id string, err error) {
	attrs := append([]slog.Attr{slog.String("sandbox", id)}, t.attrs...)
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	m.log.LogAttrs(context.Background(), slog.LevelDebug, LaunchStepsMessage, attrs...)
}
