package route

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// TopicPattern declares a topic by the subjects it holds, as a JetStream stream declares its
// subjects: every subject Subjects matches is stored in Topic, each message with its own subject
// in NATS_SUBJECT. One topic for a whole subject space (device.*.temp, orders.>) keeps its
// files to one topic's queues however many subjects there are.
type TopicPattern struct {
	// Subjects is a subscription subject: literal tokens, '*' for one token, '>' for the rest.
	Subjects string
	// Topic is where its messages go: a valid RocketMQ topic.
	Topic string
}

// ParseTopicPattern parses "PATTERN" or "PATTERN=TOPIC". Without "=TOPIC", the topic is the
// pattern's literal tokens before its first wildcard, mapped by the default rule (orders.> is
// topic orders, device.*.temp is topic device); a pattern that starts with a wildcard needs a
// name. The '=' taken is the last one, since a topic never holds one and a subject may.
func ParseTopicPattern(s string) (TopicPattern, error) {
	p := TopicPattern{Subjects: s}
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		p.Subjects, p.Topic = s[:i], s[i+1:]
		if err := commitlog.ValidateTopic(p.Topic); err != nil {
			return p, fmt.Errorf("topic pattern %q: %w", s, err)
		}
	}
	if why := natssubject.Check(p.Subjects, true); why != "" {
		return p, fmt.Errorf("topic pattern %q: %q is not a valid NATS subject pattern: %s", s, p.Subjects, why)
	}
	if err := checkStored(p.Subjects); err != nil {
		return p, err
	}
	if p.Topic == "" {
		lit := literalPrefix(p.Subjects)
		if lit == "" {
			return p, fmt.Errorf("topic pattern %q starts with a wildcard: name its topic (%s=TOPIC)", s, s)
		}
		topic, err := SubjectToTopic(lit)
		if err != nil {
			return p, fmt.Errorf("topic pattern %q: %w; name its topic (%s=TOPIC)", s, err, s)
		}
		p.Topic = topic
	}
	return p, nil
}

// literalPrefix is pattern's tokens before its first wildcard, joined by '.'.
func literalPrefix(pattern string) string {
	toks := strings.Split(pattern, ".")
	if i := slices.IndexFunc(toks, func(t string) bool { return t == "*" || t == ">" }); i >= 0 {
		toks = toks[:i]
	}
	return strings.Join(toks, ".")
}

// WideTopics are the topics that hold many subjects, each once: those of ps and OverflowTopic.
// They are the ones reads by subject are for (the subject-tag rule).
func WideTopics(ps []TopicPattern) []string {
	out := []string{OverflowTopic}
	for _, p := range ps {
		if !slices.Contains(out, p.Topic) {
			out = append(out, p.Topic)
		}
	}
	return out
}

// CheckTopicPatterns checks declared patterns: each valid (as ParseTopicPattern makes them), none
// of subjects that are never stored (NeverStored), and no two overlapping, so that every subject has at most one declared topic whatever the
// order of the declarations.
func CheckTopicPatterns(ps []TopicPattern) error {
	for i, p := range ps {
		if why := natssubject.Check(p.Subjects, true); why != "" {
			return fmt.Errorf("topic pattern %q is not a valid NATS subject pattern: %s", p.Subjects, why)
		}
		if err := commitlog.ValidateTopic(p.Topic); err != nil {
			return fmt.Errorf("topic pattern %q: %w", p.Subjects, err)
		}
		if err := checkStored(p.Subjects); err != nil {
			return err
		}
		for _, prev := range ps[:i] {
			if natssubject.Overlap(prev.Subjects, p.Subjects) {
				return fmt.Errorf("topic patterns %q and %q overlap: a subject matching both would have two "+
					"topics; make them disjoint", prev.Subjects, p.Subjects)
			}
		}
	}
	return nil
}

// checkStored refuses a pattern whose subjects are all ones ingress never stores: nothing could
// ever arrive in its topic, yet it would be declared (and written into the subject-tag file).
func checkStored(pattern string) error {
	if NeverStored(pattern) {
		return fmt.Errorf("topic pattern %q: subjects under _INBOX. and $-subjects (replies, system, JetStream and "+
			"API subjects) are never stored, so nothing would ever arrive in its topic", pattern)
	}
	return nil
}

// declaredTopic is the topic of the first pattern subject matches.
func declaredTopic(ps []TopicPattern, subject string) (string, bool) {
	for _, p := range ps {
		if natssubject.Match(p.Subjects, subject) {
			return p.Topic, true
		}
	}
	return "", false
}
