package commitlog

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for UniqKeyGen.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func TestUniqKeyGolden(t *testing.T) {
	loc := time.FixedZone("UTC+8", 8*3600)
	clock := &fakeClock{t: time.Date(2023, 11, 1, 0, 0, 0, 100*1e6, loc)} // 100 ms into the month
	g := NewUniqKeyGen(netip.MustParseAddr("127.0.0.1"), 0x1234, 0x0A0B0C0D, clock.now)
	if g.Len() != 32 {
		t.Fatalf("Len = %d", g.Len())
	}
	// UNIQ1 of the golden vectors is the second key of such a client.
	if got := g.Next(); got != "7F00000112340A0B0C0D000000640000" {
		t.Fatalf("first key %s", got)
	}
	if got := g.Next(); got != "7F00000112340A0B0C0D000000640001" {
		t.Fatalf("second key %s", got)
	}
	// A new month restarts the time part; the counter goes on.
	clock.set(time.Date(2023, 12, 1, 0, 0, 1, 0, loc))
	if got := g.Next(); got != "7F00000112340A0B0C0D000003E80002" {
		t.Fatalf("key in the next month %s", got)
	}
	// A small step back of the clock (NTP) gives 0, not a negative time.
	clock.set(time.Date(2023, 11, 30, 23, 59, 59, 500*1e6, loc))
	if got := g.Next(); got != "7F00000112340A0B0C0D000000000003" {
		t.Fatalf("key after a step back %s", got)
	}
}

func TestUniqKeyHosts(t *testing.T) {
	clock := func() time.Time { return time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC) }
	g := NewUniqKeyGen(netip.MustParseAddr("2001:db8::1"), 1, 2, clock)
	if k := g.Next(); len(k) != 56 || k[:32] != "20010DB8000000000000000000000001" {
		t.Fatalf("IPv6 key %s", k)
	}
	g = NewUniqKeyGen(netip.MustParseAddr("::ffff:10.0.0.1"), 1, 2, clock)
	if k := g.Next(); len(k) != 32 || k[:8] != "0A000001" {
		t.Fatalf("IPv4-mapped key %s", k)
	}
	g = NewUniqKeyGen(netip.Addr{}, 1, 2, clock) // unknown IP: low 4 bytes of the time
	if k := g.Next(); len(k) != 32 {
		t.Fatalf("fake-IP key %s", k)
	}
}

// TestUniqKeyConcurrent shares one generator between goroutines; with -race this checks the atomics,
// and every key must be distinct.
func TestUniqKeyConcurrent(t *testing.T) {
	clock := &fakeClock{t: time.Date(2024, 1, 31, 23, 59, 59, 0, time.UTC)}
	g := NewUniqKeyGen(netip.MustParseAddr("10.0.0.1"), 7, 9, clock.now)
	const workers, each = 4, 2000
	keys := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if w == 0 && i == each/2 {
					clock.set(time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)) // roll the month mid-run
				}
				keys[w] = append(keys[w], g.Next())
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool)
	for _, ks := range keys {
		for _, k := range ks {
			if seen[k] {
				t.Fatalf("duplicate key %s", k)
			}
			seen[k] = true
		}
	}
}
