package admin

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/pgturnstile/pgturnstile/config"
)

// UserSettings is the settings string of SET USER, parsed. A key absent
// from the string is unset (-1, PoolModeUnset): SET USER replaces the
// user's whole runtime record, it does not merge (the fork's rule).
type UserSettings struct {
	PoolMode           config.PoolMode
	MaxUserConnections int // <= 0: fall back to the global max_user_connections
	// PgBouncer 1.23+ [users] keys, accepted here too; -1 = unset.
	PoolSize, ReservePoolSize, MaxUserClientConnections int
}

// PoolSettings is the settings string of SET POOL, parsed. PoolSize < 0
// means no override.
type PoolSettings struct {
	PoolSize int
}

// ParseUserSettings parses "key=value ..." as the fork parses a [users]
// line given to SET USER: pairs separated by spaces (not tabs), a value may
// be single-quoted (a doubled quote inside stands for one), keys are case-sensitive, no empty
// value, no empty string, integers as C strtol base 0 ("0x10", "010";
// "3x" and "0d" are errors). Accepted keys: pool_mode and
// max_user_connections (the fork's), and pool_size, reserve_pool_size,
// max_user_client_connections (PgBouncer 1.23+'s [users] keys).
func ParseUserSettings(s string) (UserSettings, error) {
	u := UserSettings{MaxUserConnections: -1, PoolSize: -1, ReservePoolSize: -1, MaxUserClientConnections: -1}
	pairs, err := splitPairs(s)
	if err != nil {
		return u, err
	}
	if len(pairs) == 0 {
		return u, errors.New("empty user parameters")
	}
	for _, p := range pairs {
		var err error
		switch p.key {
		case "pool_mode":
			u.PoolMode, err = config.ParsePoolMode(p.val)
		case "max_user_connections":
			u.MaxUserConnections, err = parseLimit(p.val)
		case "pool_size":
			u.PoolSize, err = parseLimit(p.val)
		case "reserve_pool_size":
			u.ReservePoolSize, err = parseLimit(p.val)
		case "max_user_client_connections":
			u.MaxUserClientConnections, err = parseLimit(p.val)
		default:
			return u, fmt.Errorf("unrecognized user parameter: %s", p.key)
		}
		if err != nil {
			return u, fmt.Errorf("invalid value %q for %s: %v", p.val, p.key, err)
		}
	}
	return u, nil
}

// ParsePoolSettings parses the settings string of SET POOL: only
// pool_size, same rules as ParseUserSettings.
func ParsePoolSettings(s string) (PoolSettings, error) {
	ps := PoolSettings{PoolSize: -1}
	pairs, err := splitPairs(s)
	if err != nil {
		return ps, err
	}
	if len(pairs) == 0 {
		return ps, errors.New("empty pool parameters")
	}
	for _, p := range pairs {
		if p.key != "pool_size" {
			return ps, fmt.Errorf("unrecognized pool parameter: %s", p.key)
		}
		n, err := parseLimit(p.val)
		if err != nil {
			return ps, fmt.Errorf("invalid value %q for pool_size: %v", p.val, err)
		}
		ps.PoolSize = max(n, -1)
	}
	return ps, nil
}

// SplitPoolName splits the name of SET POOL, "user.database", at its one
// dot; both parts must be non-empty. Names that contain a dot cannot be
// addressed (the fork's rule).
func SplitPoolName(name string) (user, db string, ok bool) {
	user, db, found := strings.Cut(name, ".")
	if !found || user == "" || db == "" || strings.Contains(db, ".") {
		return "", "", false
	}
	return user, db, true
}

type pair struct{ key, val string }

func splitPairs(s string) ([]pair, error) {
	var out []pair
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i >= len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' {
			i++
		}
		key := s[start:i]
		if i >= len(s) || s[i] != '=' {
			return nil, fmt.Errorf("expected '=' after %q", key)
		}
		if key == "" {
			return nil, errors.New("missing parameter name before '='")
		}
		i++
		var val string
		if i < len(s) && s[i] == '\'' {
			var b strings.Builder
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						b.WriteByte('\'')
						i++
						continue
					}
					closed = true
					i++
					break
				}
				b.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted value of %q", key)
			}
			if i < len(s) && s[i] != ' ' {
				return nil, fmt.Errorf("unexpected text after the quoted value of %q", key)
			}
			val = b.String()
		} else {
			start = i
			for i < len(s) && s[i] != ' ' {
				i++
			}
			val = s[start:i]
		}
		if val == "" {
			return nil, fmt.Errorf("empty value for %q", key)
		}
		out = append(out, pair{key, val})
	}
}

// parseLimit parses an integer the way the ini does (config.ParseInt),
// within int32.
func parseLimit(s string) (int, error) {
	n, err := config.ParseInt(s)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, fmt.Errorf("integer out of range: %q", s)
	}
	return int(n), nil
}
