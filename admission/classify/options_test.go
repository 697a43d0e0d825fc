package classify

import (
	"fmt"
	"slices"
	"testing"
)

func TestSplitOptions(t *testing.T) {
	for _, tc := range []struct {
		in, rest string
		tags     []OptionTag
	}{
		{"", "", nil},
		{"   ", "   ", nil},
		{"-c search_path=x", "-c search_path=x", nil},
		{"  -c  search_path=x\t", "  -c  search_path=x\t", nil},
		{"-c pgturnstile.priority=low", "", []OptionTag{{"priority", "low"}}},
		{"-c pgturnstile.priority=low -c search_path=x", "-c search_path=x", []OptionTag{{"priority", "low"}}},
		{"-c search_path=x -cpgturnstile.source=batch", "-c search_path=x", []OptionTag{{"source", "batch"}}},
		{"--pgturnstile.priority=low", "", []OptionTag{{"priority", "low"}}},
		{"  -csearch_path=a\\ b   --pgturnstile.source=batch \n -c  PgTurnstile.End-Point=se\\ arch ",
			"-csearch_path=a\\ b", []OptionTag{{"source", "batch"}, {"end_point", "se arch"}}},
		{"-c pgturnstile.category=web/search -c pgturnstile.priority=Low", "", []OptionTag{{"category", "web/search"}, {"priority", "Low"}}},
		{"--pgturnstile.source=a\\\\b -c x=y", "-c x=y", []OptionTag{{"source", "a\\b"}}},
		{"-c pgturnstile.source=a=b", "", []OptionTag{{"source", "a=b"}}},
		{"--pgturnstile.priority=", "", []OptionTag{{"priority", ""}}},
		{"\\-c pgturnstile.priority=low", "", []OptionTag{{"priority", "low"}}},
		// not ours, or not settings: left for the pooler's options rules
		{"-c pgturnstile.priority", "-c pgturnstile.priority", nil},
		{"-c pgturnstile.=x", "-c pgturnstile.=x", nil},
		{"-c", "-c", nil},
		{"pgturnstile.priority=low", "pgturnstile.priority=low", nil},
		{"-c pgturnstilex.priority=low", "-c pgturnstilex.priority=low", nil},
		{"-c\\ pgturnstile.priority=low", "-c\\ pgturnstile.priority=low", nil},
		// -c takes the next word whatever it is
		{"-c -c pgturnstile.priority=low", "-c -c pgturnstile.priority=low", nil},
		{"-c --pgturnstile.priority=low", "-c --pgturnstile.priority=low", nil},
		{"-c x=1 -c pgturnstile.priority=low", "-c x=1", []OptionTag{{"priority", "low"}}},
		{"-e -c pgturnstile.priority=low -c", "-e -c", []OptionTag{{"priority", "low"}}},
	} {
		rest, tags := SplitOptions(tc.in)
		if rest != tc.rest || !slices.Equal(tags, tc.tags) {
			t.Errorf("SplitOptions(%q) = %q, %q; want %q, %q", tc.in, rest, tags, tc.rest, tc.tags)
		}
	}
}

func TestSplitOptionsAllocs(t *testing.T) {
	// Options without pgturnstile settings are the common case at login.
	for _, in := range []string{"", "-c search_path=x -c statement_timeout=5s", "-c pgturnstile_x=1"} {
		if n := testing.AllocsPerRun(100, func() { SplitOptions(in) }); n != 0 {
			t.Errorf("%q: %v allocations", in, n)
		}
	}
}

// words unescapes like Postgres, independently of splitWords.
func words(s string) []string {
	var out []string
	var cur []byte
	in, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			cur, esc, in = append(cur, c), false, true
		case c == '\\':
			esc, in = true, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			if in {
				out = append(out, string(cur))
				cur, in = cur[:0], false
			}
		default:
			cur, in = append(cur, c), true
		}
	}
	if in {
		out = append(out, string(cur))
	}
	return out
}

func FuzzSplitOptions(f *testing.F) {
	for _, s := range []string{
		"",
		"-c pgturnstile.priority=low -c search_path=x",
		"  -csearch_path=a\\ b   --pgturnstile.source=batch  -c  PgTurnstile.End-Point=se\\ arch ",
		"-c -c pgturnstile.priority=low",
		"-c x=1 -c pgturnstile.priority=low\\",
		"--pgturnstile.x=\\\\",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rest, tags := SplitOptions(in)
		if len(tags) == 0 {
			if rest != in {
				t.Fatalf("no tags but rest %q", rest)
			}
			return
		}
		for _, tg := range tags {
			if tg.Key == "" {
				t.Fatalf("empty key in %q", tags)
			}
		}
		// rest holds the other words, spelled as before.
		again, more := SplitOptions(rest)
		if again != rest || len(more) != 0 {
			t.Fatalf("rest %q splits again into %q, %q", rest, again, more)
		}
		// Each tag took one or two words away, and the words that stay
		// read the same.
		w, r := words(in), words(rest)
		if len(w)-len(r) < len(tags) || len(w)-len(r) > 2*len(tags) {
			t.Fatalf("%d words, %d left, %d tags", len(w), len(r), len(tags))
		}
		j := 0
		for _, x := range w {
			if j < len(r) && x == r[j] {
				j++
			}
		}
		if j != len(r) {
			t.Fatalf("words of rest %q are not a subsequence of %q", r, w)
		}
	})
}

func ExampleSplitOptions() {
	rest, tags := SplitOptions(`-c search_path=app\ schema -c pgturnstile.priority=low --pgturnstile.source=batch`)
	fmt.Printf("%q\n", rest)
	for _, t := range tags {
		fmt.Println(t.Key, t.Value)
	}
	// Output:
	// "-c search_path=app\\ schema"
	// priority low
	// source batch
}
