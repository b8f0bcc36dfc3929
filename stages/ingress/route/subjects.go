package route

import (
	"fmt"
	"strings"
)

// Subject checks. NATS subjects are tokens separated by '.'; a token is never empty and never
// holds whitespace. A subscription may use the wildcards '*' (one whole token) and '>' (the
// whole last token); a published subject may not: the server delivers such a message only when
// it runs without pedantic checks, and a stored "a.*" could never be replayed to its subject.
//
// Bytes that are legal in a subject but not in a path ('/', '\', NUL) need no check here: the
// mapping escapes every byte outside [a-zA-Z0-9-], so no topic, and so no directory name, ever
// holds them (see mapping.go and commitlog.ValidateTopic).

// SubjectSpace reports whether b is whitespace NATS refuses in a subject.
func SubjectSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\r' || b == '\n' || b == '\f' || b == '\v'
}

// checkSubjectTokens checks subject's tokens: none empty, no whitespace, and, unless
// wildcards, no '*' or '>' token; with wildcards a '>' token must be the last one. It describes
// the first problem, "" when there is none.
func checkSubjectTokens(subject string, wildcards bool) string {
	if subject == "" {
		return "empty subject"
	}
	for i := 0; i < len(subject); i++ {
		if SubjectSpace(subject[i]) {
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

// CheckPublishedSubject is the check of a message's subject (once per subject: routes are
// cached). The error wraps ErrInvalidSubject.
func CheckPublishedSubject(subject string) error {
	if why := checkSubjectTokens(subject, false); why != "" {
		return fmt.Errorf("%w: subject %.200q is not a valid NATS subject to publish to: %s",
			ErrInvalidSubject, subject, why)
	}
	return nil
}

// CheckSubscriptions checks the subjects ingress subscribes to: each a valid subscription subject (wildcards
// allowed), none under the always-excluded prefixes, no two overlapping (NATS would deliver a
// message once per matching subscription, and it would be stored twice).
func CheckSubscriptions(subjects []string) error {
	for i, s := range subjects {
		if why := checkSubjectTokens(s, true); why != "" {
			return fmt.Errorf("ingress: subject %q is not a valid NATS subject to subscribe to: %s", s, why)
		}
		if strings.HasPrefix(s, "_INBOX.") || strings.HasPrefix(s, "$") {
			return fmt.Errorf("ingress: subject %q is always excluded; subscribing to it stores nothing", s)
		}
		for _, prev := range subjects[:i] {
			if subjectsOverlap(prev, s) {
				return fmt.Errorf("ingress: subjects %q and %q overlap: a message on both would be "+
					"stored twice (NATS delivers it once per subscription); keep one of them", prev, s)
			}
		}
	}
	return nil
}

// subjectsOverlap reports whether some literal subject matches both subscription subjects a
// and b (valid ones: checkSubjectTokens passed).
func subjectsOverlap(a, b string) bool {
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
