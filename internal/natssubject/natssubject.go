// Package natssubject owns what the store knows of NATS subjects: the property a record keeps
// its subject in, the token rules of subjects and subscription patterns, and matching a subject
// against a pattern. Ingress uses it to route and check what it stores; the readers to filter
// what they return by subject.
package natssubject

import (
	"fmt"
	"strings"
)

// Property is the record property that keeps a message's NATS subject.
const Property = "NATS_SUBJECT"

// Space reports whether b is whitespace NATS refuses in a subject.
func Space(b byte) bool {
	return b == ' ' || b == '\t' || b == '\r' || b == '\n' || b == '\f' || b == '\v'
}

// Check checks subject's tokens: none empty, no whitespace, and, unless wildcards, no '*' or '>'
// token; with wildcards a '>' token must be the last one. It describes the first problem, ""
// when there is none.
func Check(subject string, wildcards bool) string {
	if subject == "" {
		return "empty subject"
	}
	for i := 0; i < len(subject); i++ {
		if Space(subject[i]) {
			return fmt.Sprintf("whitespace %q at byte %d", subject[i], i)
		}
	}
	start := 0
	for start <= len(subject) {
		end := strings.IndexByte(subject[start:], '.')
		if end < 0 {
			end = len(subject)
		} else {
			end += start
		}
		tok := subject[start:end]
		switch {
		case tok == "":
			return fmt.Sprintf("an empty token at byte %d (tokens are separated by single dots, "+
				"with none at either end)", start)
		case (tok == "*" || tok == ">") && !wildcards:
			return fmt.Sprintf("the wildcard token %q at byte %d; messages are published to literal subjects", tok, start)
		case tok == ">" && end != len(subject):
			return fmt.Sprintf("the wildcard '>' at byte %d is not the last token", start)
		}
		start = end + 1
	}
	return ""
}

// Match reports whether the literal subject matches pattern, a valid pattern (Check with
// wildcards): '*' takes one token, '>' one or more. The subject may be a record's bytes.
func Match[S ~string | ~[]byte](pattern string, subject S) bool {
	for {
		tp, rp, moreP := strings.Cut(pattern, ".")
		if tp == ">" {
			return true
		}
		ts, rs, moreS := cut(subject)
		switch {
		case tp != "*" && !equal(tp, ts):
			return false
		case !moreP || !moreS:
			return moreP == moreS
		}
		pattern, subject = rp, rs
	}
}

// Literal reports whether the valid pattern has no wildcard token: it then matches only itself.
func Literal(pattern string) bool {
	for rest := pattern; ; {
		tok, after, more := strings.Cut(rest, ".")
		if tok == "*" || tok == ">" {
			return false
		}
		if !more {
			return true
		}
		rest = after
	}
}

// cut is strings.Cut(s, ".") for either kind of subject.
func cut[S ~string | ~[]byte](s S) (before, after S, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, s[len(s):], false
}

func equal[S ~string | ~[]byte](a string, b S) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Overlap reports whether some literal subject matches both valid patterns a and b.
func Overlap(a, b string) bool {
	for {
		ta, ra, moreA := strings.Cut(a, ".")
		tb, rb, moreB := strings.Cut(b, ".")
		if ta == ">" || tb == ">" {
			return true // both have a token here: '>' takes it and any rest
		}
		if ta != "*" && tb != "*" && ta != tb {
			return false
		}
		if !moreA || !moreB {
			return moreA == moreB
		}
		a, b = ra, rb
	}
}
