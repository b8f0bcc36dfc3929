package commitlog

import (
	"fmt"
	"strings"
)

// Topic naming limits (TopicValidator, HookUtils).
const (
	// MaxTopicLen bounds ordinary topics, in bytes (= Java chars: only ASCII is allowed).
	MaxTopicLen = 127
	// MaxSysTopicLen bounds retry and dead-letter topics.
	MaxSysTopicLen = 255
	// RetryTopicPrefix starts the retry topic of a consumer group.
	RetryTopicPrefix = "%RETRY%"
	// DLQTopicPrefix starts the dead-letter topic of a consumer group.
	DLQTopicPrefix = "%DLQ%"
	// ScheduleTopic is the topic delayed messages wait on; its tags code is a delivery time.
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
)

// ValidateTopic checks a topic against RocketMQ's rules: non-empty, only the characters of
// `^[%|a-zA-Z0-9_-]+$`, at most 127 bytes, or 255 for topics starting with %RETRY% or %DLQ%. The
// error wraps ErrInvalidTopic and names the rule broken.
//
// The topic also becomes a directory name (consumequeue/<topic>/<queueId>). That is safe because of
// these rules alone: '.', '/' and '\' and NUL are not in the allowed set, so a valid topic can never
// be ".", "..", contain a path separator, or otherwise escape its parent directory.
func ValidateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: topic is empty", ErrInvalidTopic)
	}
	for i := 0; i < len(topic); i++ {
		if !topicChar(topic[i]) {
			return fmt.Errorf("%w: %q has character %q at byte %d; allowed: ^[%%|a-zA-Z0-9_-]+$",
				ErrInvalidTopic, topic, topic[i], i)
		}
	}
	limit := MaxTopicLen
	if strings.HasPrefix(topic, RetryTopicPrefix) || strings.HasPrefix(topic, DLQTopicPrefix) {
		limit = MaxSysTopicLen
	}
	if len(topic) > limit {
		return fmt.Errorf("%w: topic is %d bytes, longer than the limit of %d", ErrInvalidTopic, len(topic), limit)
	}
	return nil
}

func topicChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '%', c == '|', c == '_', c == '-':
		return true
	}
	return false
}
