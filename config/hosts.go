package config

import (
	"fmt"
	"strings"
)

// Endpoint is one host of a [databases] entry and the port to dial there.
type Endpoint struct {
	Host string // host name, IP, or a Unix socket directory (starts with '/'); "" = default
	Port int
}

// Endpoints are the hosts a [databases] entry's servers log in to, in the
// order given: host=a,b,c is three, each with its own port when port is a
// list of as many (port=5432,5433,5434), else with the one port.
func (d *Database) Endpoints() []Endpoint {
	hosts := []string{d.Host}
	if strings.Contains(d.Host, ",") {
		hosts = strings.Split(d.Host, ",")
	}
	out := make([]Endpoint, len(hosts))
	for i, h := range hosts {
		port := d.Port
		if len(d.Ports) == len(hosts) {
			port = d.Ports[i]
		}
		out[i] = Endpoint{Host: h, Port: port}
	}
	return out
}

// HostList reports whether the entry names several hosts (host=a,b):
// then load_balance_hosts applies and SHOW DATABASES / POOLS show it.
func (d *Database) HostList() bool { return strings.Contains(d.Host, ",") }

// LoadBalance is the load_balance_hosts SHOW DATABASES and SHOW POOLS
// list: set only for a host list ("" otherwise, PgBouncer's NULL),
// round-robin unless the entry says disable.
func (d *Database) LoadBalance() string {
	if !d.HostList() {
		return ""
	}
	if d.LoadBalanceHosts == "" {
		return "round-robin"
	}
	return d.LoadBalanceHosts
}

// checkHosts refuses a host list with an empty member (libpq would dial
// the default) and a port list whose length is not the host list's.
func checkHosts(d *Database) error {
	hosts := strings.Split(d.Host, ",")
	if len(hosts) > 1 {
		for _, h := range hosts {
			if h == "" {
				return fmt.Errorf("host list %q has an empty entry", d.Host)
			}
		}
	}
	if len(d.Ports) > 1 && len(d.Ports) != len(hosts) {
		return fmt.Errorf("port list has %d entries for %d hosts", len(d.Ports), len(hosts))
	}
	return nil
}
