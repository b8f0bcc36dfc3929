package offsets

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rocketstore/engine/internal/store/meta"
)

// Limits of the names an offset is stored under.
const (
	// MaxGroupLen bounds a consumer group name in bytes (RocketMQ's limit for group names).
	MaxGroupLen = 255
	// MaxMemberLen bounds a member id in bytes.
	MaxMemberLen = 64
)

// Errors of the table; compare with errors.Is.
var (
	// ErrInvalidGroup: a consumer group name the table cannot store.
	ErrInvalidGroup = errors.New("invalid consumer group")
	// ErrInvalidCommit: a commit with an invalid topic, a negative number or a long member id.
	ErrInvalidCommit = errors.New("invalid commit")
	// ErrTooManyGroups: a commit would add a group past Options.MaxGroups.
	ErrTooManyGroups = errors.New("too many consumer groups")
	// ErrReadOnly: a change asked of a table opened with Load.
	ErrReadOnly = errors.New("offsets: read-only table")
	// ErrClosed: a change asked of a closed table.
	ErrClosed = errors.New("offsets: closed")
)

// ValidateGroup checks a consumer group name: non-empty, at most MaxGroupLen bytes, valid UTF-8
// of printable characters, without '@' (the file's keys are topic@group, so a group with '@'
// could not be read back as itself). The error wraps ErrInvalidGroup.
func ValidateGroup(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: empty name", ErrInvalidGroup)
	case len(group) > MaxGroupLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidGroup, len(group), MaxGroupLen)
	case !utf8.ValidString(group):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidGroup, group)
	case strings.Contains(group, meta.OffsetKeySeparator):
		return fmt.Errorf("%w: %q contains %q, which separates topic and group in %s",
			ErrInvalidGroup, group, meta.OffsetKeySeparator, meta.ConsumerOffsetFileName)
	}
	for i, c := range group {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("%w: %q has the unprintable character %U at byte %d", ErrInvalidGroup, group, c, i)
		}
	}
	return nil
}
