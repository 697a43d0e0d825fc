package auth

import (
	"slices"
	"strings"
	"sync"
)

// Source says where a user, or its secret, came from.
type Source int

const (
	SourceAuthFile     Source = iota + 1 // auth_file: user and secret
	SourceUsersSection                   // [users] in the ini: limits only, never a secret
	SourceAuthQuery                      // seen through auth_query; secret fetched per login, per database
	SourceAdmin                          // admin console SET USER
	SourceExternal                       // logged in through LDAP or PAM; no secret kept
)

func (s Source) String() string {
	switch s {
	case SourceAuthFile:
		return "auth_file"
	case SourceUsersSection:
		return "users"
	case SourceAuthQuery:
		return "auth_query"
	case SourceAdmin:
		return "admin"
	case SourceExternal:
		return "external"
	}
	return "unknown"
}

// UserRecord is one user of the global store.
type UserRecord struct {
	Name string
	// Source is where the user was defined first by precedence: a user in
	// auth_file is an auth_file user even when [users] also names it.
	Source Source
	// Secret is the auth_file secret; nil for every other source, so limits
	// from [users] can never stand in for a password (Cloudflare's fix of
	// PgBouncer's auth_query bug).
	Secret *Secret
}

// Store is the one global user store: auth_file users, [users] entries and
// users that logged in through auth_query, each once, whatever database
// they use. Secrets from auth_query are not kept here: they are fetched on
// every login and belong to the database they came from.
type Store struct {
	mu    sync.RWMutex
	users map[string]*UserRecord
}

// NewStore builds the store from auth_file secrets and the names of the
// [users] section. prev, when not nil, contributes the auth_query users it
// has seen, so a reload keeps them listed.
func NewStore(authFile map[string]Secret, configured []string, prev *Store) *Store {
	s := &Store{users: make(map[string]*UserRecord, len(authFile)+len(configured))}
	for name, sec := range authFile {
		sec := sec
		s.users[name] = &UserRecord{Name: name, Source: SourceAuthFile, Secret: &sec}
	}
	for _, name := range configured {
		if _, ok := s.users[name]; !ok {
			s.users[name] = &UserRecord{Name: name, Source: SourceUsersSection}
		}
	}
	if prev != nil {
		prev.mu.RLock()
		for name, u := range prev.users {
			if _, ok := s.users[name]; !ok && (u.Source == SourceAuthQuery || u.Source == SourceAdmin || u.Source == SourceExternal) {
				s.users[name] = &UserRecord{Name: name, Source: u.Source}
			}
		}
		prev.mu.RUnlock()
	}
	return s
}

// Lookup returns a copy of the user's record.
func (s *Store) Lookup(name string) (UserRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	if !ok {
		return UserRecord{}, false
	}
	return *u, true
}

// NoteAuthQuery records a user that authenticated through auth_query.
func (s *Store) NoteAuthQuery(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[name]; !ok {
		s.users[name] = &UserRecord{Name: name, Source: SourceAuthQuery}
	}
}

// NoteExternal records a user that LDAP or PAM let in (PgBouncer keeps
// such users as global users too).
func (s *Store) NoteExternal(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[name]; !ok {
		s.users[name] = &UserRecord{Name: name, Source: SourceExternal}
	}
}

// NoteConfigured records a user given limits at runtime (SET USER).
func (s *Store) NoteConfigured(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[name]; !ok {
		s.users[name] = &UserRecord{Name: name, Source: SourceAdmin}
	}
}

// Users lists every user by name.
func (s *Store) Users() []UserRecord {
	s.mu.RLock()
	out := make([]UserRecord, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, *u)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b UserRecord) int { return strings.Compare(a.Name, b.Name) })
	return out
}
