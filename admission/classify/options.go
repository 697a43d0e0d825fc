package classify

import "strings"

// optionPrefix is the namespace of pgturnstile's settings in the startup
// options, as Postgres spells custom GUCs.
const optionPrefix = "pgturnstile."

// SplitOptions takes pgturnstile's own settings out of a startup "options"
// value: -c pgturnstile.KEY=VALUE, -cpgturnstile.KEY=VALUE and
// --pgturnstile.KEY=VALUE. Words are split as Postgres splits them
// (pg_split_opts): at unescaped whitespace, a backslash escaping the next
// byte. Names are matched as Postgres matches GUC names: case-insensitively,
// with '-' standing for '_' (Key is lowercase with '_'); values keep their
// case with escapes removed.
//
// Without such settings rest is options unchanged. Otherwise rest is the
// other words in their original spelling, escapes included, joined by
// single spaces: Postgres and the pooler's own options rules read it as
// they would have read those words. A setting without '=' is left in rest
// for those rules to refuse, as Postgres would.
func SplitOptions(options string) (rest string, tags []OptionTag) {
	if !mayHoldTags(options) {
		return options, nil // the usual case, without allocating
	}
	words := splitWords(options)
	keep := make([]bool, len(words))
	for i := 0; i < len(words); i++ {
		keep[i] = true
		w := words[i].text
		var kv string
		n := 1 // words the setting spans
		switch {
		case w == "-c":
			if i+1 == len(words) {
				continue
			}
			kv, n = words[i+1].text, 2
		case strings.HasPrefix(w, "--"), strings.HasPrefix(w, "-c"):
			kv = w[2:]
		default:
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(name) <= len(optionPrefix) || !strings.EqualFold(name[:len(optionPrefix)], optionPrefix) {
			if n == 2 {
				// The next word is this -c's argument, not an option.
				i++
				keep[i] = true
			}
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(name[len(optionPrefix):], "-", "_"))
		tags = append(tags, OptionTag{Key: key, Value: value})
		keep[i] = false
		i += n - 1
	}
	if len(tags) == 0 {
		return options, nil
	}
	var b strings.Builder
	for i, w := range words {
		if keep[i] {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(options[w.start:w.end])
		}
	}
	return b.String(), tags
}

// mayHoldTags is false when options cannot spell pgturnstile's prefix: it
// does not contain it in any case, and has no backslash to hide it behind.
func mayHoldTags(options string) bool {
	if strings.IndexByte(options, '\\') >= 0 {
		return true
	}
	for i := 0; i+len(optionPrefix) <= len(options); i++ {
		if strings.EqualFold(options[i:i+len(optionPrefix)], optionPrefix) {
			return true
		}
	}
	return false
}

type word struct {
	text       string // with escapes removed
	start, end int    // its spelling in the options string
}

// splitWords splits like Postgres's pg_split_opts: whitespace (C isspace)
// separates words unless escaped; a backslash makes the next byte literal.
func splitWords(s string) []word {
	var words []word
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return words
		}
		start := i
		var b strings.Builder
		escaped := false
		for ; i < len(s); i++ {
			c := s[i]
			if !escaped && isSpace(c) {
				break
			}
			if !escaped && c == '\\' {
				escaped = true
				continue
			}
			escaped = false
			b.WriteByte(c)
		}
		words = append(words, word{text: b.String(), start: start, end: i})
	}
}
