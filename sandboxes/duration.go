package sandboxes

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads the way our users write it: a JSON number is whole seconds (Bay's
// `idle_timeout: 1800`), a string is a Go duration with an optional day suffix ("30m", "1h30m", "7d").
type Duration time.Duration

// ParseDuration reads a duration as Duration's JSON form does: plain digits are seconds.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative duration %q", s)
		}
		return Duration(time.Duration(n) * time.Second), nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return Duration(time.Duration(n * float64(24*time.Hour))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %w", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return Duration(d), nil
}

// UnmarshalJSON accepts a number of seconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		if v < 0 {
			return fmt.Errorf("negative duration %v", v)
		}
		*d = Duration(time.Duration(v * float64(time.Second)))
		return nil
	case string:
		p, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*d = p
		return nil
	default:
		return fmt.Errorf("duration must be a number of seconds or a string, not %s", string(b))
	}
}

// MarshalJSON writes the Go duration string, which UnmarshalJSON reads back.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// Std returns the standard library duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
