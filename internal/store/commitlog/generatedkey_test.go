package commitlog

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestIsGeneratedUniqKey: every key a generator with GeneratedSalt makes for a store host passes,
// for IPv4, IPv4-mapped and IPv6 hosts and across pids and times; a key with another salt,
// another host, a changed case, a changed length or a stray character does not, nor does a key
// made where the host is unknown.
func TestIsGeneratedUniqKey(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC) }
	for _, host := range []string{"10.0.0.2", "::ffff:10.0.0.2", "2001:db8::2", "255.255.255.255"} {
		ip := netip.MustParseAddr(host)
		for _, pid := range []int{0, 1, 65535, 1 << 20} {
			g := NewUniqKeyGen(ip, pid, GeneratedSalt, clock)
			for range 3 {
				if k := g.Next(); !IsGeneratedUniqKey(k, ip) {
					t.Fatalf("host %s pid %d: %s not recognised", host, pid, k)
				}
			}
		}
	}
	ip := netip.MustParseAddr("10.0.0.2")
	k := NewUniqKeyGen(ip, 7, GeneratedSalt, clock).Next()
	for name, c := range map[string]struct {
		key  string
		host netip.Addr
	}{
		"another salt":   {NewUniqKeyGen(ip, 7, GeneratedSalt+1, clock).Next(), ip},
		"another host":   {k, netip.MustParseAddr("10.0.0.3")},
		"an IPv6 host":   {k, netip.MustParseAddr("2001:db8::2")},
		"unknown host":   {NewUniqKeyGen(netip.Addr{}, 7, GeneratedSalt, clock).Next(), netip.Addr{}},
		"lower case":     {strings.ToLower(k), ip},
		"one digit more": {k + "0", ip},
		"one digit less": {k[:len(k)-1], ip},
		"not hex":        {k[:len(k)-1] + "G", ip},
		"empty":          {"", ip},
		"a publisher id": {"order-1", ip},
	} {
		if IsGeneratedUniqKey(c.key, c.host) {
			t.Errorf("%s: %q taken as generated", name, c.key)
		}
	}
}

// FuzzIsGeneratedUniqKey: whatever the key read from a record and whatever its store host,
// IsGeneratedUniqKey does not fail, and says yes only to a key of the generated form with that
// host's address in front and the marker salt; a key the generator made with the host always
// passes.
func FuzzIsGeneratedUniqKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, key string, host []byte, pid uint16) {
		var ip netip.Addr
		switch len(host) {
		case 4:
			ip = netip.AddrFrom4([4]byte(host))
		case 16:
			ip = netip.AddrFrom16([16]byte(host))
		}
		if IsGeneratedUniqKey(key, ip) {
			prefix := NewUniqKeyGen(ip, int(pid), GeneratedSalt, nil).Next()
			n := len(prefix) - 24 // the address's hex digits: then pid (4), salt (8), time (8), counter (4)
			if len(key) != len(prefix) || key[:n] != prefix[:n] || key[n+4:n+12] != prefix[n+4:n+12] {
				t.Fatalf("%q taken as generated for %v", key, ip)
			}
		}
		if ip.IsValid() {
			if k := NewUniqKeyGen(ip, int(pid), GeneratedSalt, nil).Next(); !IsGeneratedUniqKey(k, ip) {
				t.Fatalf("the generator's %q for %v not recognised", k, ip)
			}
		}
	})
}

// TestStartCounter: the next key carries the counter it was started at, and it goes on from
// there, wrapping at 16 bits as Java's short does.
func TestStartCounter(t *testing.T) {
	g := NewUniqKeyGen(netip.MustParseAddr("10.0.0.2"), 1, GeneratedSalt, nil)
	g.StartCounter(0x1FFFF)
	a, b := g.Next(), g.Next()
	if a[len(a)-4:] != "FFFF" || b[len(b)-4:] != "0000" {
		t.Fatalf("keys %s then %s", a, b)
	}
}
