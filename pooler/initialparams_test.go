package pooler

import (
	"maps"
	"reflect"
	"testing"
)

// A client's tracked parameters are the pool's welcome overridden by its
// startup packet; clients with the same startup parameters share one map,
// and one computed before the pool had its welcome is not reused after.
func TestInitialParamsMergedAndShared(t *testing.T) {
	svc := &Service{tracked: map[string]string{
		"client_encoding": "client_encoding", "datestyle": "DateStyle", "application_name": "application_name",
	}}
	p := &serverPool{svc: svc}
	early := p.initialParams(map[string]string{"application_name": "app"})
	if want := map[string]string{"application_name": "app"}; !maps.Equal(early, want) {
		t.Fatalf("before the welcome: %v; want %v", early, want)
	}
	p.welcome = map[string]string{"client_encoding": "UTF8", "DateStyle": "ISO, MDY", "server_version": "15.8"}
	a := p.initialParams(map[string]string{"application_name": "app"})
	b := p.initialParams(map[string]string{"application_name": "app"})
	want := map[string]string{"application_name": "app", "client_encoding": "UTF8", "DateStyle": "ISO, MDY"}
	if !maps.Equal(a, want) || !maps.Equal(b, want) {
		t.Fatalf("after the welcome: %v and %v; want %v", a, b, want)
	}
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Error("two clients with the same startup parameters got maps of their own")
	}
	c := p.initialParams(map[string]string{"application_name": "other", "client_encoding": "LATIN1"})
	if want := map[string]string{"application_name": "other", "client_encoding": "LATIN1", "DateStyle": "ISO, MDY"}; !maps.Equal(c, want) {
		t.Fatalf("other startup parameters: %v; want %v", c, want)
	}
	if got := p.initialParams(map[string]string{"application_name": "app"}); !maps.Equal(got, a) {
		t.Fatalf("the first parameters again: %v; want %v", got, a)
	}
}
