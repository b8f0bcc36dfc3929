package commitlog

import (
	"net/netip"
	"testing"
	"time"
)

// TestUniqKeyPastInt32Milliseconds: the time part is the ms since the month's start cut to 32
// bits, as Java's (int) cast writes it: past 2^31 ms (24.8 days into a month) it reads negative
// as an int32 and is kept as it is (only a small negative value is a clock step back), up to the
// last ms of a 31-day month; the next month starts again at 0. The clock is set at each limit.
func TestUniqKeyPastInt32Milliseconds(t *testing.T) {
	loc := time.FixedZone("UTC+8", 8*3600)
	month := time.Date(2024, 1, 1, 0, 0, 0, 0, loc) // 31 days
	clock := &fakeClock{t: month}
	g := NewUniqKeyGen(netip.MustParseAddr("127.0.0.1"), 0x1234, 0x0A0B0C0D, clock.now)
	const prefix = "7F00000112340A0B0C0D"
	const monthMs = 31 * 24 * 3600 * 1000
	for i, tc := range []struct {
		ms   int64 // since the month's start
		want string
	}{
		{1<<31 - 1, "7FFFFFFF"},
		{1 << 31, "80000000"},
		{1<<31 + 5, "80000005"},
		{monthMs - 1, "9FA523FF"}, // the month's last ms
		{monthMs, "00000000"},     // the next month's first
	} {
		clock.set(month.Add(time.Duration(tc.ms) * time.Millisecond))
		got := g.Next()
		if want := prefix + tc.want + "000" + string("0123456789ABCDEF"[i]); got != want {
			t.Errorf("%d ms into the month: %s, want %s", tc.ms, got, want)
		}
	}
}

// TestUniqKeyCounterWrap: the counter is written as its low 16 bits (Java's (short) cast); across
// its own 32-bit wrap (the seam sets it there) the written part goes on without a jump.
func TestUniqKeyCounterWrap(t *testing.T) {
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := NewUniqKeyGen(netip.MustParseAddr("127.0.0.1"), 1, 2, clock.now)
	g.counter.Store(1<<32 - 2)
	for _, want := range []string{"FFFE", "FFFF", "0000", "0001"} {
		if k := g.Next(); k[len(k)-4:] != want {
			t.Fatalf("key %s, want the counter part %s", k, want)
		}
	}
}
