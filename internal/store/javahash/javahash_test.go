package javahash

import (
	"testing"

	"github.com/rocketstore/engine/internal/golden"
)

// TestGoldenHashes checks the HASHES block of the shared golden vectors.
func TestGoldenHashes(t *testing.T) {
	v := golden.Load()
	if len(v.HASHES) == 0 {
		t.Fatal("no HASHES in vectors.json")
	}
	for s, want := range v.HASHES {
		if got := String(s); got != want {
			t.Errorf("String(%q) = %d, want %d", s, got, want)
		}
		if got := Bytes([]byte(s)); got != want {
			t.Errorf("Bytes(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestKnownValues(t *testing.T) {
	cases := []struct {
		s    string
		want int32
	}{
		{"TagA", 2598919},
		{"Aa", 2112},
		{"BB", 2112},
		{"polygenelubricants", -2147483648},
		{"", 0},
		{"é", 0xE9},                        // one UTF-16 unit
		{"😀", 31*0xD83D + 0xDE00},          // surrogate pair
		{"a\xffb", (97*31+0xFFFD)*31 + 98}, // invalid byte decodes as U+FFFD
	}
	for _, c := range cases {
		if got := String(c.s); got != c.want {
			t.Errorf("String(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	if got := IndexKeyHash("polygenelubricants"); got != 0 {
		t.Errorf("IndexKeyHash(MIN_VALUE key) = %d, want 0", got)
	}
	if got := IndexKeyHash("TopicTest#OrderID188"); got != 1231271670 {
		t.Errorf("IndexKeyHash = %d, want 1231271670", got)
	}
	if got := TagsCode("TagA"); got != 2598919 {
		t.Errorf("TagsCode = %d", got)
	}
}

func FuzzStringMatchesBytes(f *testing.F) {
	f.Add("TagA")
	f.Add("a\xffb\xf0\x9f\x98")
	f.Fuzz(func(t *testing.T, s string) {
		if String(s) != Bytes([]byte(s)) {
			t.Fatalf("String and Bytes disagree on %q", s)
		}
	})
}
