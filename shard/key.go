package shard

import (
	"encoding/binary"
	"errors"
	"math"
)

// KeyType is how a colocation's key is decoded and hashed.
type KeyType uint8

// The key types. Smallint, Int and Bigint hash alike for equal values;
// they differ in the range their text form accepts.
const (
	KeyBigint KeyType = iota + 1
	KeyInt
	KeySmallint
	KeyText
	KeyUUID
)

var keyTypeNames = [...]string{
	KeyBigint:   "bigint",
	KeyInt:      "int",
	KeySmallint: "smallint",
	KeyText:     "text",
	KeyUUID:     "uuid",
}

// String returns the type's name in the shard file.
func (t KeyType) String() string {
	if t == 0 || int(t) >= len(keyTypeNames) {
		return "invalid"
	}
	return keyTypeNames[t]
}

// ParseKeyType reads a key_type: one of the names String gives, or a
// Postgres alias (int8, integer, int4, int2, varchar).
func ParseKeyType(s string) (KeyType, bool) {
	switch s {
	case "bigint", "int8":
		return KeyBigint, true
	case "int", "integer", "int4":
		return KeyInt, true
	case "smallint", "int2":
		return KeySmallint, true
	case "text", "varchar":
		return KeyText, true
	case "uuid":
		return KeyUUID, true
	}
	return 0, false
}

// Errors of the key decoders. Postgres would reject such a value for the
// key's type, so no shard holds it: the router sends the statement to any
// shard and lets Postgres report the genuine error.
var (
	ErrKeySyntax = errors.New("invalid input syntax for the key type")
	ErrKeyRange  = errors.New("key value out of range for the key type")
	ErrKeyLength = errors.New("wrong length for a binary key")
)

// HashText is the row hash of a key given in text form: a SQL literal's
// contents (quotes and escapes already undone) or a text-format Bind
// parameter. It accepts what the type's input function accepts in any
// supported Postgres version (a superset is safe: a form an older server
// rejects is an error on every shard, while refusing a form some server
// accepts would misplace a key). Text keys are hashed as given: the bytes
// must be in the server's encoding, and whether that encoding accepts them
// is for the server to say.
func (t KeyType) HashText(b []byte) (Hash, error) {
	switch t {
	case KeyBigint, KeyInt, KeySmallint:
		v, err := t.ParseInt(b)
		if err != nil {
			return 0, err
		}
		return HashInt64(v), nil
	case KeyText:
		return HashBytes(b), nil
	case KeyUUID:
		var u [16]byte
		if err := ParseUUID(b, &u); err != nil {
			return 0, err
		}
		return HashUUID(&u), nil
	}
	return 0, ErrKeySyntax
}

// HashBinary is the row hash of a key given as a binary-format Bind
// parameter: a 2, 4 or 8-byte big-endian integer for the integer types
// (the parameter's declared type may be narrower or wider than the
// column's: int2, int4 and int8 hash alike), 16 bytes for uuid, the bytes
// themselves for text.
func (t KeyType) HashBinary(b []byte) (Hash, error) {
	switch t {
	case KeyBigint, KeyInt, KeySmallint:
		v, err := ParseBinaryInt(b)
		if err != nil {
			return 0, err
		}
		return HashInt64(v), nil
	case KeyText:
		return HashBytes(b), nil
	case KeyUUID:
		if len(b) != 16 {
			return 0, ErrKeyLength
		}
		return HashUUID((*[16]byte)(b)), nil
	}
	return 0, ErrKeySyntax
}

// ParseBinaryInt decodes a binary-format int2, int4 or int8.
func ParseBinaryInt(b []byte) (int64, error) {
	switch len(b) {
	case 2:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case 8:
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return 0, ErrKeyLength
}

// ParseInt reads an integer key in text form as the type's input function
// (int2in, int4in, int8in) does, and checks the type's range.
func (t KeyType) ParseInt(b []byte) (int64, error) {
	v, err := ParseInt64(b)
	if err != nil {
		return 0, err
	}
	switch t {
	case KeyInt:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return 0, ErrKeyRange
		}
	case KeySmallint:
		if v < math.MinInt16 || v > math.MaxInt16 {
			return 0, ErrKeyRange
		}
	}
	return v, nil
}

// isSpace is C's isspace in the C locale, which Postgres' integer input
// uses for the blanks it allows around the number.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// ParseInt64 reads a bigint in text form as Postgres' int8in does
// (pg_strtoint64): blanks around, an optional sign, then decimal digits,
// or since PostgreSQL 16 a 0x, 0o or 0b prefix (either case) and digits of
// that base; since 16 a single '_' may separate digits (and follow a
// prefix, but not start a decimal number). A NUL byte ends a C string, so
// it is not accepted anywhere (Postgres rejects it on the wire).
func ParseInt64(b []byte) (int64, error) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	base := uint64(10)
	if i+1 < len(b) && b[i] == '0' {
		switch b[i+1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 10 {
			i += 2
		}
	}
	first := i
	// The magnitude may reach 1<<63 (math.MinInt64's); a positive value
	// must then also fit math.MaxInt64. v*base+d overflows that limit
	// exactly when v > cutoff, or v == cutoff and d > cutlim.
	const limit = uint64(1) << 63
	cutoff, cutlim := limit/10, limit%10
	if base != 10 {
		cutoff, cutlim = limit/base, limit%base // 0: the limit is a power of two
	}
	var v uint64
	for i < len(b) {
		c := b[i]
		if c == '_' {
			// Between digits only; after a prefix too, but not first in
			// a decimal number.
			if base == 10 && i == first {
				return 0, ErrKeySyntax
			}
			if i+1 >= len(b) || digitVal(b[i+1]) >= base {
				return 0, ErrKeySyntax
			}
			i++
			continue
		}
		d := digitVal(c)
		if d >= base {
			break
		}
		if v > cutoff || v == cutoff && d > cutlim {
			return 0, ErrKeyRange
		}
		v = v*base + d
		i++
	}
	if i == first {
		return 0, ErrKeySyntax
	}
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i != len(b) {
		return 0, ErrKeySyntax
	}
	if neg {
		return int64(-v), nil // -(1<<63) wraps to MinInt64
	}
	if v > math.MaxInt64 {
		return 0, ErrKeyRange
	}
	return int64(v), nil
}

// digitVal is c's value as a digit of base up to 16, or 16 for a byte
// that is no digit.
func digitVal(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 16
}

// ParseUUID reads a uuid in text form as Postgres' uuid_in does: 32 hex
// digits (either case), optionally with one '-' after any group of four
// (the canonical 8-4-4-4-12 is one such layout), the whole optionally in
// braces; nothing else, not even blanks.
func ParseUUID(b []byte, u *[16]byte) error {
	i := 0
	braces := len(b) > 0 && b[0] == '{'
	if braces {
		i++
	}
	for n := 0; n < 16; n++ {
		if i+1 >= len(b) {
			return ErrKeySyntax
		}
		hi, lo := digitVal(b[i]), digitVal(b[i+1])
		if hi > 15 || lo > 15 {
			return ErrKeySyntax
		}
		u[n] = byte(hi<<4 | lo)
		i += 2
		if n%2 == 1 && n < 15 && i < len(b) && b[i] == '-' {
			i++
		}
	}
	if braces {
		if i >= len(b) || b[i] != '}' {
			return ErrKeySyntax
		}
		i++
	}
	if i != len(b) {
		return ErrKeySyntax
	}
	return nil
}
