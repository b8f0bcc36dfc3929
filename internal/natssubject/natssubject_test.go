package natssubject

import (
	"strings"
	"testing"
)

func TestMatchSubject(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"orders.>", "orders.eu", true},
		{"orders.>", "orders.eu.paid", true},
		{"orders.>", "orders", false},
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders.eu.paid", false},
		{"orders.*", "orders", false},
		{"device.*.temp", "device.7.temp", true},
		{"device.*.temp", "device.7.hum", false},
		{"device.*.temp", "device.7.temp.x", false},
		{"*", "a", true},
		{"*", "a.b", false},
		{">", "a.b", true},
		{"a.b", "a.b", true},
		{"a.b", "a.bc", false},
		{"a.b", "a", false},
	} {
		if got := Match(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
		// A literal subject matches a pattern exactly when the two overlap.
		if got := Overlap(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}

func TestSubjectsOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{">", "a", true}, {">", "a.b.c", true}, {"a.>", "a", false}, {"a.>", "a.b", true},
		{"a.*", "a", false}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"*.b", "a.*", true},
		{"a.b", "a.c", false}, {"a.b", "a.b", true}, {"a.b", "a.b.c", false}, {"*", "*.a", false},
		{"a.*.>", "a.b", false}, {"a.*.>", "a.b.c", true},
	} {
		if got := Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("overlap(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := Overlap(tc.b, tc.a); got != tc.want {
			t.Errorf("overlap(%q, %q) = %v", tc.b, tc.a, got)
		}
	}
}

// matchByTokens is Match written the obvious way, for the differential fuzz target.
func matchByTokens(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

// FuzzMatch: for every valid pattern and literal subject, Match agrees with a token-by-token
// match and with Overlap (a literal overlaps a pattern exactly when it matches it). Read
// requests carry the pattern (checked with Check) and records the subject.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"orders.>", "orders.eu"}, {"a.*.c", "a.b.c"}, {"*", "a.b"}, {">", "x"},
		{"device.*.temp", "device.7.temp"}, {"a.b", "a.bc"}, {"a.*", "a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		if Check(pattern, true) != "" || Check(subject, false) != "" {
			return
		}
		want := matchByTokens(pattern, subject)
		if got := Match(pattern, subject); got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, subject, got, want)
		}
		if got := Match(pattern, []byte(subject)); got != want {
			t.Fatalf("Match(%q, []byte(%q)) = %v, want %v", pattern, subject, got, want)
		}
		if Literal(pattern) && (pattern == subject) != want {
			t.Fatalf("literal %q: equal to %q is %v, Match %v", pattern, subject, pattern == subject, want)
		}
		if got := Overlap(pattern, subject); got != want {
			t.Fatalf("Overlap(%q, %q) = %v, want %v", pattern, subject, got, want)
		}
	})
}
