package pooler

import (
	"maps"
	"reflect"
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// A client's tracked parameters are the pool's welcome overridden by its
// startup packet; clients with the same startup parameters share one map,
// and one computed before the pool had its welcome is not reused after.
func TestInitialParamsMergedAndShared(t *testing.T) {
	svc := &Service{tracked: map[string]string{
		"client_encoding": "client_encoding", "datestyle": "DateStyle", "application_name": "application_name",
	}}
	p := &serverPool{svc: svc}
	early := paramsOnly(p.loginParams(map[string]string{"application_name": "app"}))
	if want := map[string]string{"application_name": "app"}; !maps.Equal(early, want) {
		t.Fatalf("before the welcome: %v; want %v", early, want)
	}
	p.welcome = map[string]string{"client_encoding": "UTF8", "DateStyle": "ISO, MDY", "server_version": "15.8"}
	a := paramsOnly(p.loginParams(map[string]string{"application_name": "app"}))
	b := paramsOnly(p.loginParams(map[string]string{"application_name": "app"}))
	want := map[string]string{"application_name": "app", "client_encoding": "UTF8", "DateStyle": "ISO, MDY"}
	if !maps.Equal(a, want) || !maps.Equal(b, want) {
		t.Fatalf("after the welcome: %v and %v; want %v", a, b, want)
	}
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Error("two clients with the same startup parameters got maps of their own")
	}
	c := paramsOnly(p.loginParams(map[string]string{"application_name": "other", "client_encoding": "LATIN1"}))
	if want := map[string]string{"application_name": "other", "client_encoding": "LATIN1", "DateStyle": "ISO, MDY"}; !maps.Equal(c, want) {
		t.Fatalf("other startup parameters: %v; want %v", c, want)
	}
	if got := paramsOnly(p.loginParams(map[string]string{"application_name": "app"})); !maps.Equal(got, a) {
		t.Fatalf("the first parameters again: %v; want %v", got, a)
	}
}

// The welcome's ParameterStatus messages: the pool's parameters with the
// client's values over them, then the client's own, sorted by name; built
// once per set of startup parameters once the pool has its welcome.
func TestLoginParamsStatus(t *testing.T) {
	svc := &Service{tracked: map[string]string{"client_encoding": "client_encoding", "application_name": "application_name"}}
	p := &serverPool{svc: svc}
	if _, status := p.loginParams(map[string]string{"application_name": "app"}); status != nil {
		t.Fatalf("before the welcome: %q", status)
	}
	p.welcome = map[string]string{"client_encoding": "UTF8", "server_version": "15.8", "application_name": ""}
	params, status := p.loginParams(map[string]string{"application_name": "app", "client_encoding": "LATIN1"})
	var want []byte
	for _, kv := range [][2]string{{"application_name", "app"}, {"client_encoding", "LATIN1"}, {"server_version", "15.8"}} {
		want = wire.AppendParameterStatus(want, kv[0], kv[1])
	}
	if string(status) != string(want) {
		t.Fatalf("status %q; want %q", status, want)
	}
	if want := map[string]string{"application_name": "app", "client_encoding": "LATIN1"}; !maps.Equal(params, want) {
		t.Fatalf("params %v; want %v", params, want)
	}
	_, again := p.loginParams(map[string]string{"application_name": "app", "client_encoding": "LATIN1"})
	if len(again) == 0 || &again[0] != &status[0] {
		t.Error("the same startup parameters built their status again")
	}
	// A parameter the welcome lacks (a tracked one the server did not
	// report) goes after, in name order.
	extra := wire.AppendParameterStatuses(nil, map[string]string{"b": "1"}, map[string]string{"c": "3", "a": "2"})
	var wantExtra []byte
	for _, kv := range [][2]string{{"a", "2"}, {"b", "1"}, {"c", "3"}} {
		wantExtra = wire.AppendParameterStatus(wantExtra, kv[0], kv[1])
	}
	if string(extra) != string(wantExtra) {
		t.Fatalf("extra %q; want %q", extra, wantExtra)
	}
}

// paramsOnly is loginParams' map.
func paramsOnly(m map[string]string, _ []byte) map[string]string { return m }
