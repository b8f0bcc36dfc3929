package route

import (
	"fmt"
	"strings"

	"github.com/rocketstore/engine/internal/natssubject"
)

// Subject checks. NATS subjects are tokens separated by '.'; a token is never empty and never
// holds whitespace. A subscription may use the wildcards '*' (one whole token) and '>' (the
// whole last token); a published subject may not: the server delivers such a message only when
// it runs without pedantic checks, and a stored "a.*" could never be replayed to its subject.
//
// Bytes that are legal in a subject but not in a path ('/', '\', NUL) need no check here: the
// mapping escapes every byte outside [a-zA-Z0-9-], so no topic, and so no directory name, ever
// holds them (see mapping.go and commitlog.ValidateTopic).

// CheckPublishedSubject is the check of a message's subject (once per subject: routes are
// cached). The error wraps ErrInvalidSubject.
func CheckPublishedSubject(subject string) error {
	if why := natssubject.Check(subject, false); why != "" {
		return fmt.Errorf("%w: subject %.200q is not a valid NATS subject to publish to: %s",
			ErrInvalidSubject, subject, why)
	}
	return nil
}

// NeverStored says subject, or every subject the pattern subject matches, is one ingress never
// stores: a reply inbox (_INBOX.) or a $-subject (system, JetStream and API subjects).
func NeverStored(subject string) bool {
	return strings.HasPrefix(subject, "_INBOX.") || strings.HasPrefix(subject, "$")
}

// CheckSubscriptions checks the subjects ingress subscribes to: each a valid subscription subject (wildcards
// allowed), none under the always-excluded prefixes, no two overlapping (NATS would deliver a
// message once per matching subscription, and it would be stored twice).
func CheckSubscriptions(subjects []string) error {
	for i, s := range subjects {
		if why := natssubject.Check(s, true); why != "" {
			return fmt.Errorf("ingress: subject %q is not a valid NATS subject to subscribe to: %s", s, why)
		}
		if NeverStored(s) {
			return fmt.Errorf("ingress: subject %q is always excluded; subscribing to it stores nothing", s)
		}
		for _, prev := range subjects[:i] {
			if natssubject.Overlap(prev, s) {
				return fmt.Errorf("ingress: subjects %q and %q overlap: a message on both would be "+
					"stored twice (NATS delivers it once per subscription); keep one of them", prev, s)
			}
		}
	}
	return nil
}
