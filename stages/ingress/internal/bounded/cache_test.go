package bounded

import "testing"

func TestBoundedCacheEvicts(t *testing.T) {
	c := NewCache[int, int](10) // generations of 5
	mk := func(k int) int { return k * 10 }
	for k := range 100 {
		if v := c.GetOrMake(k, mk); v != k*10 {
			t.Fatalf("get %d = %d", k, v)
		}
		c.GetOrMake(0, func(int) int { t.Fatal("hot key 0 was evicted"); return 0 })
		if n := c.Len(); n > 10 {
			t.Fatalf("cache holds %d entries, bound 10", n)
		}
	}
	if c.Evictions() == 0 {
		t.Fatal("no evictions counted")
	}
}
