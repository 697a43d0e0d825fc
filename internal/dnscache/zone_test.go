package dnscache

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// resolv_conf: its nameserver lines are read; a file that cannot be read
// is an error.
func TestResolvConf(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	os.WriteFile(path, []byte("# x\nsearch example.com\nnameserver 10.1.2.3\nnameserver fd00::53\noptions ndots:2\n"), 0o644)
	got, err := ReadNameservers(path)
	if err != nil || !slices.Equal(got, []string{"10.1.2.3:53", "[fd00::53]:53"}) {
		t.Errorf("nameservers %q %v", got, err)
	}
	if r, err := NewResolver(path); err != nil || r == net.DefaultResolver || !r.PreferGo || r.Dial == nil {
		t.Errorf("resolver for resolv_conf: %+v %v", r, err)
	}
	if _, err := NewResolver(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "resolv_conf: open ") {
		t.Errorf("missing resolv_conf: %v", err)
	}
}

// The zone check's SOA query, against a nameserver on loopback.
func TestSOASerialQuery(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 || q.Questions[0].Type != dnsmessage.TypeSOA {
				continue
			}
			ans := dnsmessage.Message{
				Header:    dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true},
				Questions: q.Questions,
			}
			if q.Questions[0].Name.String() == "example.com." {
				ans.Answers = []dnsmessage.Resource{{
					Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypeSOA, Class: dnsmessage.ClassINET, TTL: 60},
					Body: &dnsmessage.SOAResource{NS: dnsmessage.MustNewName("ns.example.com."), MBox: dnsmessage.MustNewName("h.example.com."),
						Serial: 2026120201, Refresh: 1, Retry: 1, Expire: 1, MinTTL: 1},
				}}
			} else {
				ans.RCode = dnsmessage.RCodeNameError
			}
			b, _ := ans.Pack()
			pc.WriteTo(b, from)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	servers := []string{pc.LocalAddr().String()}
	if s, err := SOASerial(ctx, servers, "example.com"); err != nil || s != 2026120201 {
		t.Errorf("serial %d %v", s, err)
	}
	if _, err := SOASerial(ctx, servers, "nowhere.test"); err == nil {
		t.Errorf("NXDOMAIN gave a serial")
	}
}
