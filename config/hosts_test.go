package config

import (
	"slices"
	"strings"
	"testing"
)

func TestHostListEndpoints(t *testing.T) {
	c := mustParse(t, `[databases]
one = host=db1
shared = host=a,b,c port=6000 load_balance_hosts=disable target_session_attrs=read-write
each = host=a,b port=5433,5434 target_session_attrs=prefer-standby
`)
	cases := map[string][]Endpoint{
		"one":    {{"db1", 5432}},
		"shared": {{"a", 6000}, {"b", 6000}, {"c", 6000}},
		"each":   {{"a", 5433}, {"b", 5434}},
	}
	for name, want := range cases {
		if got := c.Databases[name].Endpoints(); !slices.Equal(got, want) {
			t.Errorf("%s: endpoints %v, want %v", name, got, want)
		}
	}
	if d := c.Databases["each"]; d.Port != 5433 || d.TargetSessionAttrs != "prefer-standby" {
		t.Errorf("each: port %d attrs %q", d.Port, d.TargetSessionAttrs)
	}
	if c.Databases["one"].HostList() || !c.Databases["shared"].HostList() {
		t.Error("HostList wrong")
	}
	// load_balance_hosts as SHOW lists it: only for a host list, its
	// default spelled out.
	for name, want := range map[string]string{"one": "", "shared": "disable", "each": "round-robin"} {
		if got := c.Databases[name].LoadBalance(); got != want {
			t.Errorf("%s: LoadBalance %q, want %q", name, got, want)
		}
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
}

func TestHostListRefused(t *testing.T) {
	for ini, want := range map[string]string{
		"[databases]\nx = host=a,b,c port=1,2\n": "port list has 2 entries for 3 hosts",
		"[databases]\nx = host=a,,b\n":           "has an empty entry",
		"[databases]\nx = host=a,b port=1,x\n":   "port",
	} {
		_, err := parse("pgbouncer.ini", []byte(ini), memFS{}.read)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", ini, err, want)
		}
	}
}
