package admin

func init() {
	shows["dns_hosts"] = showCmd{cols: dnsHostsCols, rows: dnsHostsRows}
	shows["dns_zones"] = showCmd{cols: dnsZonesCols, rows: dnsZonesRows}
}

// DNSHost is one row of SHOW DNS_HOSTS: a server host name in the DNS
// cache, the seconds its answer is still kept, its addresses.
type DNSHost struct {
	Hostname string
	TTL      int64
	Addrs    string
}

// DNSZone is one row of SHOW DNS_ZONES: a zone of cached names, its last
// serial seen (dns_zone_check_period), how many names it holds.
type DNSZone struct {
	Zonename string
	Serial   int64
	Count    int
}

// DNSCache is what a Console with a DNS cache gives SHOW DNS_HOSTS and
// SHOW DNS_ZONES; without it they have no rows.
type DNSCache interface {
	DNSHosts() []DNSHost
	DNSZones() []DNSZone
}

func dnsHostsRows(con Console) [][]value {
	d, ok := con.(DNSCache)
	if !ok {
		return nil
	}
	var out [][]value
	for _, h := range d.DNSHosts() {
		out = append(out, []value{text(h.Hostname), num(h.TTL), text(h.Addrs)})
	}
	return out
}

func dnsZonesRows(con Console) [][]value {
	d, ok := con.(DNSCache)
	if !ok {
		return nil
	}
	var out [][]value
	for _, z := range d.DNSZones() {
		out = append(out, []value{text(z.Zonename), num(z.Serial), num(z.Count)})
	}
	return out
}
