package auth

import "testing"

func TestStoreSources(t *testing.T) {
	file := map[string]Secret{"alice": {Kind: SecretPlain, Plain: "pw"}, "both": {Kind: SecretPlain, Plain: "x"}}
	s := NewStore(file, []string{"limited", "both"}, nil)
	cases := []struct {
		name      string
		source    Source
		hasSecret bool
	}{
		{"alice", SourceAuthFile, true},
		{"both", SourceAuthFile, true},         // auth_file wins; its secret stays
		{"limited", SourceUsersSection, false}, // limits never imply a password
	}
	for _, c := range cases {
		u, ok := s.Lookup(c.name)
		if !ok || u.Source != c.source || (u.Secret != nil) != c.hasSecret {
			t.Errorf("%s: %+v ok=%v", c.name, u, ok)
		}
	}
	if _, ok := s.Lookup("nobody"); ok {
		t.Fatal("unknown user found")
	}
	s.NoteAuthQuery("shadow")
	s.NoteAuthQuery("alice") // already an auth_file user: unchanged
	if u, _ := s.Lookup("alice"); u.Source != SourceAuthFile {
		t.Fatal("auth_query must not override auth_file")
	}
	// A reload keeps auth_query users listed but takes everything else from
	// the new files.
	s2 := NewStore(map[string]Secret{}, nil, s)
	if u, ok := s2.Lookup("shadow"); !ok || u.Source != SourceAuthQuery || u.Secret != nil {
		t.Fatalf("shadow after reload: %+v %v", u, ok)
	}
	if _, ok := s2.Lookup("alice"); ok {
		t.Fatal("alice removed from auth_file must be gone")
	}
	names := []string{}
	for _, u := range s.Users() {
		names = append(names, u.Name)
	}
	if len(names) != 4 || names[0] != "alice" || names[3] != "shadow" {
		t.Fatalf("Users() = %v", names)
	}
}
