package commitlog

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestOffsetMsgIDRoundTrip(t *testing.T) {
	cases := []struct {
		host string
		off  int64
		want string
	}{
		{"192.168.0.20:10911", 0, "C0A8001400002A9F0000000000000000"},
		{"[::ffff:192.168.0.20]:10911", 0, "C0A8001400002A9F0000000000000000"},
		{"[2001:db8::2]:10911", 1073745920, "20010DB800000000000000000000000200002A9F0000000040001000"},
		{"255.255.255.255:65535", -1, "FFFFFFFF0000FFFFFFFFFFFFFFFFFFFF"},
	}
	for _, c := range cases {
		h := netip.MustParseAddrPort(c.host)
		if got := OffsetMsgID(h, c.off); got != c.want {
			t.Errorf("OffsetMsgID(%s, %d) = %s, want %s", c.host, c.off, got, c.want)
		}
		for _, id := range []string{c.want, strings.ToLower(c.want)} {
			gh, goff, err := ParseOffsetMsgID(id)
			if err != nil || gh != storedForm(h) || goff != c.off {
				t.Errorf("ParseOffsetMsgID(%s) = %v, %d, %v", id, gh, goff, err)
			}
		}
	}
}

func TestParseOffsetMsgIDErrors(t *testing.T) {
	for _, id := range []string{
		"",
		"C0A8001400002A9F000000000000000",   // 31 chars
		"C0A8001400002A9F00000000000000000", // 33 chars
		"C0A8001400002A9F000000000000000G",  // not hex
		"C0A80014FFFFFFFF0000000000000000",  // port -1
		"C0A800140001000000000000000000000", // wrong length
		"C0A800140001000000000000000000 0",  // space
	} {
		if _, _, err := ParseOffsetMsgID(id); !errors.Is(err, ErrInvalidMsgID) {
			t.Errorf("ParseOffsetMsgID(%q) = %v, want ErrInvalidMsgID", id, err)
		}
	}
}
