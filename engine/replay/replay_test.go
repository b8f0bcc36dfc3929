package replay

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

func TestGeneratedUniqKey(t *testing.T) {
	now := time.Now()
	gen := commitlog.NewUniqKeyGen(netip.MustParseAddr("127.0.0.1"), 42, 7, func() time.Time { return now })
	gen6 := commitlog.NewUniqKeyGen(netip.MustParseAddr("2001:db8::1"), 42, 7, func() time.Time { return now })
	born := now.UnixMilli()
	for _, tc := range []struct {
		key  string
		born int64
		want bool
	}{
		{gen.Next(), born, true},
		{gen6.Next(), born, true},
		{gen.Next(), born + 10*60_000, false}, // made ten minutes before its message: not ours
		{"order-17", born, false},
		{"7F0000010000002A00000007" + "zzzzzzzz", born, false},
	} {
		if got := GeneratedUniqKey(tc.key, tc.born); got != tc.want {
			t.Errorf("GeneratedUniqKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
	for name, want := range map[string]string{"X#2": "X", "Multi#10": "Multi", "#2": "", "X#": "", "X2": "", "__CRC32#": ""} {
		base, ok := ValueSuffixBase(name)
		if base != want || ok != (want != "") {
			t.Errorf("ValueSuffixBase(%q) = %q, %v", name, base, ok)
		}
	}
}

// TestGeneratedUniqKeyAcrossTheWrap: replay tells a generated UNIQ_KEY by its time part, which
// holds the ms since the month's start in 32 bits: it is recognised past 2^31 ms (negative as an
// int32), at the month's last ms, and when the message was taken just after the month the key
// was made in ended.
func TestGeneratedUniqKeyAcrossTheWrap(t *testing.T) {
	month := time.Date(2024, 1, 1, 0, 0, 0, 0, time.Local) // 31 days
	end := month.AddDate(0, 1, 0)
	for _, tc := range []struct {
		made, born time.Time
		want       bool
	}{
		{month.Add((1<<31 + 10) * time.Millisecond), month.Add((1<<31 + 10) * time.Millisecond), true},
		{month.Add((1<<31 - 10) * time.Millisecond), month.Add((1<<31 + 10) * time.Millisecond), true},
		{month.Add((1<<31 + 10) * time.Millisecond), month.Add((1<<31)*time.Millisecond + 2*time.Minute), false},
		{end.Add(-time.Millisecond), end.Add(-time.Millisecond), true},
		{end.Add(-30 * time.Second), end.Add(30 * time.Second), true},
	} {
		gen := commitlog.NewUniqKeyGen(netip.MustParseAddr("127.0.0.1"), 42, 7, func() time.Time { return tc.made })
		if got := GeneratedUniqKey(gen.Next(), tc.born.UnixMilli()); got != tc.want {
			t.Errorf("made %v, born %v: %v, want %v", tc.made, tc.born, got, tc.want)
		}
	}
}

// TestReplayRateAtTheLimit: a paced replay's interval between two messages must fit a
// time.Duration: a rate whose interval overflows it is refused, one just inside is taken. (The
// schedule, interval × messages sent, overflows only 292 years after the start.)
func TestReplayRateAtTheLimit(t *testing.T) {
	for rate, ok := range map[float64]bool{1e-9: true, float64(time.Second) / math.MaxInt64 * 1.0001: true,
		float64(time.Second) / math.MaxInt64: false, 1e-10: false, math.SmallestNonzeroFloat64: false} {
		req := Request{Topic: "t", Subject: "to", Mode: Paced, Rate: rate}
		if err := Check(&req); (err == nil) != ok {
			t.Errorf("rate %g: %v, want accepted %v", rate, err, ok)
		}
	}
}
