package auth

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/bidi"
	"golang.org/x/text/unicode/norm"
)

// saslPrep normalises a password the way PostgreSQL's pg_saslprep does
// before it is fed to PBKDF2, so that keys we derive from a plain password
// match the ones PostgreSQL (and libpq, which does the same on its side)
// derive. It matters only when the pooler derives SCRAM keys from a
// cleartext password: a plain secret with scram-sha-256, a cleartext
// password against a SCRAM secret, and SCRAMSecret.
//
// Like PostgreSQL, when the input is not valid UTF-8 or SASLprep would
// reject it, the raw bytes are used instead. Pure ASCII is returned as is.
//
// Approximation: the RFC 3454 table A.1 (code points unassigned in Unicode
// 3.2) is not checked, so for a password containing a character assigned
// after Unicode 3.2 *and* something SASLprep changes, PostgreSQL uses the raw
// bytes where we normalise. Such passwords should be stored as SCRAM
// secrets, which are never re-derived here.
func saslPrep(password string) string {
	raw := password
	ascii := true
	for _, c := range []byte(raw) {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || !utf8.ValidString(raw) {
		return raw
	}

	// 1) Map: non-ASCII spaces (C.1.2) to SPACE, "commonly mapped to
	// nothing" (B.1) removed.
	mapped := make([]rune, 0, len(password))
	for _, r := range password {
		switch {
		case isNonASCIISpace(r):
			mapped = append(mapped, ' ')
		case isMappedToNothing(r):
		default:
			mapped = append(mapped, r)
		}
	}
	// 2) Normalise with NFKC.
	out := norm.NFKC.String(string(mapped))
	if out == "" {
		return raw
	}
	// 3) Prohibit, 4) bidi check.
	var hasRandAL, hasL bool
	for _, r := range out {
		if isProhibited(r) {
			return raw
		}
		p, _ := bidi.LookupRune(r)
		switch p.Class() {
		case bidi.R, bidi.AL:
			hasRandAL = true
		case bidi.L:
			hasL = true
		}
	}
	if hasRandAL {
		first, _ := utf8.DecodeRuneInString(out)
		last, _ := utf8.DecodeLastRuneInString(out)
		if hasL || !isRandAL(first) || !isRandAL(last) {
			return raw
		}
	}
	return out
}

func isRandAL(r rune) bool {
	p, _ := bidi.LookupRune(r)
	return p.Class() == bidi.R || p.Class() == bidi.AL
}

// isNonASCIISpace is RFC 3454 table C.1.2.
func isNonASCIISpace(r rune) bool {
	return r == 0x00A0 || r == 0x1680 || (0x2000 <= r && r <= 0x200B) ||
		r == 0x202F || r == 0x205F || r == 0x3000
}

// isMappedToNothing is RFC 3454 table B.1.
func isMappedToNothing(r rune) bool {
	switch r {
	case 0x00AD, 0x034F, 0x1806, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF:
		return true
	}
	return (0x180B <= r && r <= 0x180D) || (0xFE00 <= r && r <= 0xFE0F)
}

// isProhibited is RFC 4013 section 2.3: RFC 3454 tables C.1.2, C.2.1, C.2.2,
// C.3, C.4, C.5, C.6, C.7, C.8 and C.9.
func isProhibited(r rune) bool {
	switch {
	case isNonASCIISpace(r): // C.1.2
		return true
	case r < 0x20 || r == 0x7F: // C.2.1
		return true
	case 0x80 <= r && r <= 0x9F, r == 0x06DD, r == 0x070F, r == 0x180E,
		r == 0x200C, r == 0x200D, r == 0x2028, r == 0x2029,
		0x2060 <= r && r <= 0x2063, r == 0xFEFF, 0x1D173 <= r && r <= 0x1D17A: // C.2.2
		return true
	case 0xE000 <= r && r <= 0xF8FF, 0xF0000 <= r && r <= 0xFFFFD, 0x100000 <= r && r <= 0x10FFFD: // C.3
		return true
	case 0xFDD0 <= r && r <= 0xFDEF, r&0xFFFE == 0xFFFE: // C.4
		return true
	case 0xD800 <= r && r <= 0xDFFF: // C.5
		return true
	case 0xFFF9 <= r && r <= 0xFFFD: // C.6 (C.2.2 has FFF9-FFFC)
		return true
	case 0x2FF0 <= r && r <= 0x2FFB: // C.7
		return true
	case r == 0x0340, r == 0x0341, r == 0x200E, r == 0x200F,
		0x202A <= r && r <= 0x202E, 0x206A <= r && r <= 0x206F: // C.8
		return true
	case r == 0xE0001, 0xE0020 <= r && r <= 0xE007F: // C.9
		return true
	}
	return false
}
