package route

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/subjecttags"
)

const upperHex = "0123456789ABCDEF"

// Errors of the mapping, always wrapped with the detail.
var (
	// ErrInvalidSubject: the subject cannot become a topic (empty, or its topic is too long), or
	// it cannot be stored as the NATS_SUBJECT property.
	ErrInvalidSubject = errors.New("ingress: invalid subject")
	// ErrNotMappedTopic: TopicToSubject was given a topic the mapping never produces.
	ErrNotMappedTopic = errors.New("ingress: topic is not a mapped subject")
)

// Mapping is the subject -> topic rule (see the package doc): declared patterns first, then the
// default or the token rule, within a limit on the topics the rule makes (the limit is the
// Router's: it needs state). The zero value is the default rule within DefaultMaxTopics.
type Mapping struct {
	// TopicTokens is N of the token rule: the first N tokens form the topic, the rest TAGS.
	// 0 means the default rule (the whole subject is the topic).
	TopicTokens int
	// Patterns are the declared topics (CheckTopicPatterns): they match before the rule and are
	// never limited.
	Patterns []TopicPattern
	// MaxTopics bounds the topics the rule makes: a subject whose topic would be a new one past
	// it goes to OverflowTopic instead. 0 is DefaultMaxTopics; -1 is no limit.
	MaxTopics int
	// KnownTopics are the topics the store already has: they count against MaxTopics, and a
	// subject whose topic is among them keeps it, so that the limit holds across restarts.
	KnownTopics []string
	// SubjectTags are the topics under the subject-tag rule (internal/store/subjecttags): their
	// messages' TAGS is the subject, and the tags header is kept as an ordinary header, whichever
	// rule chose the topic (a pattern taken out of the config leaves its topic under the rule).
	SubjectTags *subjecttags.Set
}

// Check checks m: TopicTokens not negative, MaxTopics at least -1, the patterns valid and
// disjoint (CheckTopicPatterns).
func (m Mapping) Check() error {
	if m.TopicTokens < 0 {
		return fmt.Errorf("TopicTokens is %d, must be 0 or more", m.TopicTokens)
	}
	if m.MaxTopics < -1 {
		return fmt.Errorf("MaxTopics is %d, must be -1 (no limit), 0 (the default, %d) or more", m.MaxTopics, DefaultMaxTopics)
	}
	return CheckTopicPatterns(m.Patterns)
}

// Map returns the topic for subject and, under the token rule, the tags taken from its remaining
// tokens ("" when there are none). It does not apply the topic limit. The error wraps
// ErrInvalidSubject.
func (m Mapping) Map(subject string) (topic, tags string, err error) {
	topic, tags, _, err = m.mapDeclared(subject)
	return topic, tags, err
}

// mapDeclared is Map, and whether a declared pattern chose the topic.
func (m Mapping) mapDeclared(subject string) (topic, tags string, declared bool, err error) {
	if topic, ok := declaredTopic(m.Patterns, subject); ok {
		return topic, "", true, nil
	}
	head := subject
	if m.TopicTokens > 0 {
		head, tags = splitTokens(subject, m.TopicTokens)
	}
	topic, err = SubjectToTopic(head)
	if err != nil {
		if m.TopicTokens > 0 {
			return "", "", false, fmt.Errorf("%w (the first %d tokens of %q)", err, m.TopicTokens, subject)
		}
		return "", "", false, err
	}
	return topic, tags, false, nil
}

// splitTokens cuts subject after its n-th '.'-separated token: head holds the first n tokens,
// tail the rest ("" when the subject has n tokens or fewer).
func splitTokens(subject string, n int) (head, tail string) {
	i := 0
	for range n {
		j := strings.IndexByte(subject[i:], '.')
		if j < 0 {
			return subject, ""
		}
		i += j + 1
	}
	return subject[:i-1], subject[i:]
}

// topicByteLen is how many topic bytes b takes under the default rule.
func topicByteLen(b byte) int {
	if keepByte(b) || b == '.' {
		return 1
	}
	return 3
}

// keepByte reports whether b stands for itself in a topic.
func keepByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-'
}

// TopicLen returns the length of SubjectToTopic(subject) without building it.
func TopicLen(subject string) int {
	n := 0
	for i := 0; i < len(subject); i++ {
		n += topicByteLen(subject[i])
	}
	return n
}

// SubjectToTopic maps a subject to its topic with the default rule: [a-zA-Z0-9-] unchanged, '.'
// to '_', any other byte to '%' and two uppercase hex digits. The error wraps ErrInvalidSubject
// when the subject is empty or its topic would exceed RocketMQ's 127 bytes.
func SubjectToTopic(subject string) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("%w: empty subject", ErrInvalidSubject)
	}
	n := 0
	for i := 0; i < len(subject); i++ {
		n += topicByteLen(subject[i])
		if n > commitlog.MaxTopicLen {
			// Counting stops here: a subject can be as long as a payload, and this runs on the
			// hot path (once per subject, thanks to the cache).
			return "", fmt.Errorf("%w: subject %.64q... maps to a topic longer than RocketMQ's limit "+
				"of %d bytes; use a shorter subject or the token rule (TopicTokens) so that fewer "+
				"tokens form the topic", ErrInvalidSubject, subject, commitlog.MaxTopicLen)
		}
	}
	if n == len(subject) && !strings.ContainsRune(subject, '.') {
		return subject, nil // common case: nothing to escape, no copy
	}
	return string(AppendTopic(make([]byte, 0, n), subject)), nil
}

// AppendTopic appends the default-rule topic of subject to dst, without the length check.
func AppendTopic(dst []byte, subject string) []byte {
	for i := 0; i < len(subject); i++ {
		switch b := subject[i]; {
		case keepByte(b):
			dst = append(dst, b)
		case b == '.':
			dst = append(dst, '_')
		default:
			dst = append(dst, '%', upperHex[b>>4], upperHex[b&0xF])
		}
	}
	return dst
}

// TopicToSubject is the inverse of SubjectToTopic. It accepts only topics SubjectToTopic can
// produce: '_' decodes to '.', "%XX" (uppercase hex) to byte 0xXX, [a-zA-Z0-9-] to itself; an
// escape of a byte that would stand for itself, a lowercase or short escape, a '|' or any other
// byte, or a topic over 127 bytes is an error wrapping ErrNotMappedTopic. So
// SubjectToTopic(TopicToSubject(t)) == t for every t it accepts.
func TopicToSubject(topic string) (string, error) {
	if topic == "" {
		return "", fmt.Errorf("%w: empty topic", ErrNotMappedTopic)
	}
	if len(topic) > commitlog.MaxTopicLen {
		return "", fmt.Errorf("%w: %d bytes, longer than any mapped topic (%d)", ErrNotMappedTopic,
			len(topic), commitlog.MaxTopicLen)
	}
	out := make([]byte, 0, len(topic))
	for i := 0; i < len(topic); i++ {
		switch b := topic[i]; {
		case keepByte(b):
			out = append(out, b)
		case b == '_':
			out = append(out, '.')
		case b == '%':
			if i+2 >= len(topic) {
				return "", fmt.Errorf("%w: %q has a short escape at byte %d", ErrNotMappedTopic, topic, i)
			}
			hi, ok1 := unhexUpper(topic[i+1])
			lo, ok2 := unhexUpper(topic[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: %q has an escape at byte %d that is not two uppercase hex digits",
					ErrNotMappedTopic, topic, i)
			}
			c := hi<<4 | lo
			if keepByte(c) || c == '.' {
				return "", fmt.Errorf("%w: %q escapes %q at byte %d, which the mapping never escapes",
					ErrNotMappedTopic, topic, c, i)
			}
			out = append(out, c)
			i += 2
		default:
			return "", fmt.Errorf("%w: %q has byte %q at %d, which the mapping never produces",
				ErrNotMappedTopic, topic, b, i)
		}
	}
	return string(out), nil
}

func unhexUpper(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
