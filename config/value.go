package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// value is one parsed setting; which field is meaningful depends on Kind.
type value struct {
	i    int64
	b    bool
	d    time.Duration
	s    string // KindString, KindEnum (canonical spelling)
	list []string
	f    float64
}

// parse validates raw text for this key.
func (k *Key) parse(raw string) (value, error) {
	var v value
	var err error
	switch k.Kind {
	case KindInt:
		v.i, err = parseInt(raw)
		if err == nil && (v.i < k.min || v.i > k.max) {
			err = fmt.Errorf("must be between %d and %d", k.min, k.max)
		}
	case KindBool:
		v.b, err = parseBool(raw)
	case KindDuration:
		v.d, err = parseDuration(raw)
	case KindEnum:
		v.s, err = parseEnum(raw, k.Values)
	case KindString:
		v.s = raw
		if k.check != nil {
			err = k.check(raw)
		}
	case KindList:
		v.list = parseList(raw)
	case KindFloat:
		v.f, err = parseFloat(raw)
		if err == nil && (v.f < k.fmin || v.f > k.fmax) {
			err = fmt.Errorf("must be between %g and %g", k.fmin, k.fmax)
		}
	}
	return v, err
}

// format prints a value the way PgBouncer's SHOW CONFIG does.
func (k *Key) format(v value) string {
	switch k.Kind {
	case KindInt:
		return strconv.FormatInt(v.i, 10)
	case KindBool:
		if v.b {
			return "1"
		}
		return "0"
	case KindDuration:
		return formatDuration(v.d)
	case KindList:
		return strings.Join(v.list, ",")
	case KindFloat:
		return strconv.FormatFloat(v.f, 'g', 6, 64)
	}
	return v.s
}

// apply stores a parsed value into its Settings field, if the key has one.
func (k *Key) apply(s *Settings, v value) {
	if k.field == nil {
		return
	}
	switch p := k.field(s).(type) {
	case *int:
		*p = int(v.i)
	case *bool:
		*p = v.b
	case *time.Duration:
		*p = v.d
	case *string:
		*p = v.s
	case *[]string:
		*p = v.list
	case *float64:
		*p = v.f
	case *PoolMode:
		m, _ := ParsePoolMode(v.s)
		*p = m
	default:
		panic(fmt.Sprintf("BUG: config key %s has field of type %T", k.Name, p))
	}
}

// ParseInt parses an integer setting as PgBouncer does, like C
// strtol(s, &end, 0) requiring the whole string: optional sign, then 0x/0X
// hex, leading-0 octal, or decimal. The admin console's SET USER / SET POOL
// values use it too.
func ParseInt(s string) (int64, error) { return parseInt(s) }

func parseInt(s string) (int64, error) {
	t := s
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	base := 10
	switch {
	case len(t) > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'):
		base, t = 16, t[2:]
	case len(t) > 1 && t[0] == '0':
		base, t = 8, t[1:]
	}
	if t == "" || t[0] == '+' || t[0] == '-' || t[0] == '_' {
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	u, err := strconv.ParseUint(t, base, 63)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("integer out of range: %q", s)
		}
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	if neg {
		return -int64(u), nil
	}
	return int64(u), nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "yes", "on", "true":
		return true, nil
	case "0", "no", "off", "false":
		return false, nil
	}
	// PgBouncer stores booleans as ints: any integer is accepted, non-zero is on.
	if i, err := parseInt(s); err == nil {
		return i != 0, nil
	}
	return false, fmt.Errorf("not a boolean: %q (use 0/1, yes/no, on/off, true/false)", s)
}

// maxDurationSeconds is the largest duration in seconds a time.Duration holds.
var maxDurationSeconds = float64(1<<63-1) / float64(time.Second)

// parseDuration accepts seconds with an optional fraction, as PgBouncer's
// strtod-based parser does, or a Go duration with units ("100ms", "1m30s").
// Negative values are rejected. The result is truncated to microseconds,
// PgBouncer's resolution.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("not a duration: %q", s)
	}
	if last := s[len(s)-1] | 0x20; last >= 'a' && last <= 'z' {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("not a duration: %q", s)
		}
		if d < 0 {
			return 0, fmt.Errorf("duration must not be negative: %q", s)
		}
		return d.Truncate(time.Microsecond), nil
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, fmt.Errorf("not a duration in seconds: %q", s)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a duration in seconds: %q", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("duration must not be negative: %q", s)
	}
	if f >= maxDurationSeconds {
		return 0, fmt.Errorf("duration too large: %q", s)
	}
	return time.Duration(math.Round(f*1e6)) * time.Microsecond, nil
}

// formatDuration prints seconds like C's "%g" (PgBouncer's SHOW CONFIG).
func formatDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'g', 6, 64)
}

// parseFloat accepts a plain decimal number ("0.1", "1e-2"); NaN and the
// infinities are refused.
func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	return f, nil
}

func parseEnum(s string, values []string) (string, error) {
	for _, v := range values {
		if strings.EqualFold(s, v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("must be one of %s", strings.Join(values, ", "))
}

func parseList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
