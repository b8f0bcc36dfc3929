package derive

import "testing"

func TestParseDelayLevels(t *testing.T) {
	got, err := ParseDelayLevels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultDelayLevels()
	if len(got) != len(def) {
		t.Fatalf("%d levels, want %d", len(got), len(def))
	}
	for i := range got {
		if got[i] != def[i] {
			t.Fatalf("level %d = %d, want %d", i+1, got[i], def[i])
		}
	}
	if d, err := ParseDelayLevels("2d"); err != nil || d[0] != 2*86400000 {
		t.Fatalf("2d = %v, %v", d, err)
	}
	for _, bad := range []string{"", "1s  2s", "1x", "s", "-1s", "99999999999999999999s"} {
		if _, err := ParseDelayLevels(bad); err == nil {
			t.Errorf("ParseDelayLevels(%q) accepted", bad)
		}
	}
	def[0] = 0 // the copy is the caller's
	if DefaultDelayLevels()[0] != 1000 {
		t.Fatal("DefaultDelayLevels shares its slice")
	}
}
