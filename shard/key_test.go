package shard

import (
	"errors"
	"math"
	"testing"
)

func TestParseInt64(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  error
	}{
		{"0", 0, nil},
		{"42", 42, nil},
		{"-42", -42, nil},
		{"+42", 42, nil},
		{"-0", 0, nil},
		{"007", 7, nil}, // decimal, not octal
		{" \t\n\v\f\r42 \t\n\v\f\r", 42, nil},
		{"9223372036854775807", math.MaxInt64, nil},
		{"-9223372036854775808", math.MinInt64, nil},
		{"9223372036854775808", 0, ErrKeyRange},
		{"-9223372036854775809", 0, ErrKeyRange},
		{"99999999999999999999999", 0, ErrKeyRange},
		// PostgreSQL 16's forms.
		{"0x1F", 31, nil},
		{"0X1f", 31, nil},
		{"-0x8000000000000000", math.MinInt64, nil},
		{"0x8000000000000000", 0, ErrKeyRange},
		{"0o17", 15, nil},
		{"0O17", 15, nil},
		{"0b101", 5, nil},
		{"0B101", 5, nil},
		{"1_000_000", 1000000, nil},
		{"0x_ff", 255, nil}, // after a prefix, '_' may come first
		{"0_1", 1, nil},
		// Not integers.
		{"", 0, ErrKeySyntax},
		{" ", 0, ErrKeySyntax},
		{"-", 0, ErrKeySyntax},
		{"+-1", 0, ErrKeySyntax},
		{"- 1", 0, ErrKeySyntax},
		{"1 2", 0, ErrKeySyntax},
		{"1.0", 0, ErrKeySyntax},
		{"1e3", 0, ErrKeySyntax},
		{"0x", 0, ErrKeySyntax},
		{"0xg", 0, ErrKeySyntax},
		{"0b2", 0, ErrKeySyntax},
		{"0o8", 0, ErrKeySyntax},
		{"_1", 0, ErrKeySyntax},
		{"1_", 0, ErrKeySyntax},
		{"1__0", 0, ErrKeySyntax},
		{"0x1_", 0, ErrKeySyntax},
		{"42\x00", 0, ErrKeySyntax},
		{"\u00a042", 0, ErrKeySyntax}, // only ASCII blanks
		{"٤٢", 0, ErrKeySyntax},
	} {
		got, err := ParseInt64([]byte(tc.in))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseInt64(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseIntRanges(t *testing.T) {
	for _, tc := range []struct {
		t    KeyType
		in   string
		want error
	}{
		{KeyInt, "2147483647", nil},
		{KeyInt, "-2147483648", nil},
		{KeyInt, "2147483648", ErrKeyRange},
		{KeyInt, "-2147483649", ErrKeyRange},
		{KeySmallint, "32767", nil},
		{KeySmallint, "-32768", nil},
		{KeySmallint, "32768", ErrKeyRange},
		{KeySmallint, "-32769", ErrKeyRange},
		{KeyBigint, "2147483648", nil},
	} {
		if _, err := tc.t.ParseInt([]byte(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("%s %q: %v, want %v", tc.t, tc.in, err, tc.want)
		}
	}
}

func TestParseUUID(t *testing.T) {
	want := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	// The forms of the PostgreSQL documentation (datatype-uuid) and the
	// rest of what uuid_in's grammar allows.
	for _, in := range []string{
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
		"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
		"a0eebc999c0b4ef8bb6d6bb9bd380a11",
		"a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
		"{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
		"a0eebc99-9c0b4ef8bb6d6bb9bd380a11",
	} {
		var u [16]byte
		if err := ParseUUID([]byte(in), &u); err != nil || u != want {
			t.Errorf("ParseUUID(%q) = %x, %v; want %x", in, u, err, want)
		}
	}
	for _, in := range []string{
		"",
		"{}",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",      // 31 digits
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",    // 33
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",    // trailing '-'
		"-a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",    // leading '-'
		"a0e-ebc99-9c0b-4ef8-bb6d-6bb9bd380a11",    // '-' inside a group of four
		"a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",    // two
		"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",    // unclosed
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",    // unopened
		" a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",    // blanks
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 ",    //
		"g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",     // not hex
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\x00", // NUL
	} {
		var u [16]byte
		if err := ParseUUID([]byte(in), &u); !errors.Is(err, ErrKeySyntax) {
			t.Errorf("ParseUUID(%q) = %v, want ErrKeySyntax", in, err)
		}
	}
}

func TestHashBinary(t *testing.T) {
	// Every width of an integer places alike.
	for _, v := range []int64{0, 1, -1, 42, -42, math.MinInt16, math.MaxInt16} {
		want := HashInt64(v)
		for _, b := range [][]byte{
			{byte(v >> 8), byte(v)},
			{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)},
			{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)},
		} {
			for _, kt := range []KeyType{KeyBigint, KeyInt, KeySmallint} {
				if got, err := kt.HashBinary(b); err != nil || got != want {
					t.Errorf("%s binary %x: %#x, %v; want %#x", kt, b, uint64(got), err, uint64(want))
				}
			}
		}
	}
	for _, n := range []int{0, 1, 3, 5, 16} {
		if _, err := KeyBigint.HashBinary(make([]byte, n)); !errors.Is(err, ErrKeyLength) {
			t.Errorf("bigint binary of %d bytes: %v, want ErrKeyLength", n, err)
		}
	}
	for _, n := range []int{0, 15, 17, 36} {
		if _, err := KeyUUID.HashBinary(make([]byte, n)); !errors.Is(err, ErrKeyLength) {
			t.Errorf("uuid binary of %d bytes: %v, want ErrKeyLength", n, err)
		}
	}
	// Text is its bytes in both forms.
	for _, s := range []string{"", "a", "日本語"} {
		a, _ := KeyText.HashText([]byte(s))
		b, _ := KeyText.HashBinary([]byte(s))
		if a != b || a != HashBytes([]byte(s)) {
			t.Errorf("text %q: text and binary forms differ", s)
		}
	}
	if _, err := KeyType(0).HashText([]byte("1")); err == nil {
		t.Error("the zero KeyType hashed a key")
	}
}

func TestParseKeyType(t *testing.T) {
	for s, want := range map[string]KeyType{
		"bigint": KeyBigint, "int8": KeyBigint, "int": KeyInt, "integer": KeyInt, "int4": KeyInt,
		"smallint": KeySmallint, "int2": KeySmallint, "text": KeyText, "varchar": KeyText, "uuid": KeyUUID,
	} {
		if got, ok := ParseKeyType(s); !ok || got != want {
			t.Errorf("ParseKeyType(%q) = %v, %v", s, got, ok)
		}
		if got, _ := ParseKeyType(want.String()); got != want {
			t.Errorf("%v does not read back from its String", want)
		}
	}
	for _, s := range []string{"", "BIGINT", "numeric", "bytea"} {
		if _, ok := ParseKeyType(s); ok {
			t.Errorf("ParseKeyType(%q) accepted", s)
		}
	}
}

// The router hashes a key per routed statement and per Bind: it must not
// allocate.
func TestKeyHashingDoesNotAllocate(t *testing.T) {
	text := []byte("-9223372036854775808")
	uuid := []byte("{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}")
	str := []byte("some tenant name, twenty-nine")
	bin8 := []byte{0, 0, 0, 0, 0, 0, 1, 0}
	bin16 := make([]byte, 16)
	var sink uint32
	allocs := testing.AllocsPerRun(100, func() {
		for _, f := range []func() (Hash, error){
			func() (Hash, error) { return KeyBigint.HashText(text) },
			func() (Hash, error) { return KeyUUID.HashText(uuid) },
			func() (Hash, error) { return KeyText.HashText(str) },
			func() (Hash, error) { return KeyBigint.HashBinary(bin8) },
			func() (Hash, error) { return KeyUUID.HashBinary(bin16) },
			func() (Hash, error) { return KeyInt.HashText([]byte("x")) }, // error path
		} {
			h, _ := f()
			sink += h.Logical(256)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
	_ = sink
}

var benchSink uint32

func benchHash(b *testing.B, kt KeyType, binary bool, key []byte) {
	b.ReportAllocs()
	for b.Loop() {
		var h Hash
		var err error
		if binary {
			h, err = kt.HashBinary(key)
		} else {
			h, err = kt.HashText(key)
		}
		if err != nil {
			b.Fatal(err)
		}
		benchSink += h.Logical(256)
	}
}

func BenchmarkHashBigintText(b *testing.B) {
	benchHash(b, KeyBigint, false, []byte("1234567890123"))
}
func BenchmarkHashBigintBinary(b *testing.B) {
	benchHash(b, KeyBigint, true, []byte{0, 0, 1, 0x1f, 0x71, 0xfb, 0x04, 0xcb})
}
func BenchmarkHashIntText(b *testing.B) { benchHash(b, KeyInt, false, []byte("42")) }
func BenchmarkHashTextText(b *testing.B) {
	benchHash(b, KeyText, false, []byte("tenant-0a8f3c21"))
}
func BenchmarkHashText64Bytes(b *testing.B) {
	benchHash(b, KeyText, false, []byte("a fairly long tenant key of sixty-four bytes, for the benchmark!"))
}
func BenchmarkHashUUIDText(b *testing.B) {
	benchHash(b, KeyUUID, false, []byte("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"))
}
func BenchmarkHashUUIDBinary(b *testing.B) {
	benchHash(b, KeyUUID, true, []byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11})
}
