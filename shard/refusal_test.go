package shard

import (
	"strings"
	"testing"
)

func TestEscapeStrings(t *testing.T) {
	for v, want := range map[string]bool{
		"off": true, "OFF": true, "of": true, "false": true, "f": true, "fal": true, "no": true, "n": true, "0": true, " off ": true,
		"on": false, "o": false, "true": false, "t": false, "yes": false, "1": false, "": false, "offf": false,
	} {
		if got := EscapeStrings(v); got != want {
			t.Errorf("EscapeStrings(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestCrossShardScatter: a scatter in a transaction (or a pinned session)
// is refused with the scatter's reason, not as a statement for another
// shard named "".
func TestCrossShardScatter(t *testing.T) {
	msg, detail, hint := CrossShardText(Decision{Source: SourceScatter, Table: []byte("files"), Column: "org_id"}, "s0")
	if !strings.Contains(detail, "every shard") || !strings.Contains(detail, "files") || strings.Contains(msg, "shard  in") || hint == "" {
		t.Fatalf("got %q / %q / %q", msg, detail, hint)
	}
}

func TestRaiseSQLQuotes(t *testing.T) {
	if got := RaiseSQL("it's", "", "h"); !strings.Contains(got, "MESSAGE = 'it''s', DETAIL = '', HINT = 'h'") {
		t.Fatal(got)
	}
}
