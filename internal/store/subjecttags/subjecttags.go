// Package subjecttags owns the subject-tag rule of wide topics (declared ones, the overflow
// topic) and the file that says which topics follow it. In a topic under the rule every record's
// TAGS is its NATS subject (NATS_SUBJECT) or absent, so the ConsumeQueue's tag code, the Java hash
// of TAGS that RocketMQ consumers already filter by, tells a read by one subject which units
// cannot match without reading their records: a unit whose code is neither 0 (no TAGS) nor the
// subject's hash holds another subject. The bytes stay RocketMQ's: TAGS is an ordinary property, and RocketMQ's own
// dispatch builds the same tag codes from the same CommitLog.
//
// The rule holds for a topic from its first record or not at all: a topic already in the store
// when it is declared may hold records whose TAGS a publisher chose, and a skip by code would
// lose them. So the set only grows by topics new to the store (Adopt), it is saved before the
// first record of such a topic is written (on a full disk, as soon as space returns: see Adopt),
// and a topic keeps the rule for as long as the store has the file.
package subjecttags

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// FileName is the file, in meta.ConfigDirName, of the topics under the rule. RocketMQ has no
// such file and ignores it.
const FileName = "subjectTags.json"

// ErrTagsNotSubject is returned for a message to a topic under the rule whose TAGS would not be
// its subject.
var ErrTagsNotSubject = errors.New("subjecttags: the topic keeps each message's subject as its TAGS")

// file is the content of FileName.
type file struct {
	Topics []string `json:"topics"` // sorted
}

// Set is the topics of a store under the rule. The zero value and nil are the empty set;
// a Set is not changed once made, so it can be shared.
type Set struct {
	topics map[string]struct{}
}

// Has reports whether topic is under the rule.
func (s *Set) Has(topic string) bool {
	if s == nil {
		return false
	}
	_, ok := s.topics[topic]
	return ok
}

// Len is the number of topics under the rule.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.topics)
}

// Topics are the topics under the rule, sorted.
func (s *Set) Topics() []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.topics))
	for t := range s.topics {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func path(dir string) string { return filepath.Join(dir, meta.ConfigDirName, FileName) }

// Load reads the set of the store in dir: empty when the store has no file. A file (and backup)
// that does not decode is an error that says how to go on: without the file every topic is read
// record by record, which is always right.
func Load(fsys vfs.FS, dir string) (*Set, error) {
	var f file
	if _, err := meta.Load(fsys, path(dir), &f); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &Set{}, nil
		}
		if errors.Is(err, meta.ErrCorrupt) {
			return nil, fmt.Errorf("subject tags: %w; removing %s and its %s backup is safe: reads of one subject "+
				"then read every record of those topics", err, path(dir), meta.BakSuffix)
		}
		return nil, fmt.Errorf("subject tags: %w", err)
	}
	s := &Set{topics: make(map[string]struct{}, len(f.Topics))}
	for _, t := range f.Topics {
		s.topics[t] = struct{}{}
	}
	return s, nil
}

// Adopt returns s with the wide topics (declared ones, the overflow topic) that are not among the
// store's topics (known) put under the rule, saved durably in dir first when any is new. One
// the store already has keeps the rule it has, and log says so once: reads of one of its
// subjects read each of its records.
//
// On a disk with no space left (vfs.IsNoSpace) it returns the new set with the error, so that
// a start on a full disk need not fail: the caller may apply it and Save it once space is freed.
// No record can be stored while the disk is that full, so only a crash between space coming back
// and the save can leave a topic with records and no rule, which the next start then reads as it
// reads a topic stored before the rule: record by record, always right.
func Adopt(fsys vfs.FS, dir string, s *Set, wide, known []string, log zerolog.Logger) (*Set, error) {
	var add, legacy []string
	for _, t := range wide {
		switch {
		case s.Has(t) || slices.Contains(add, t) || slices.Contains(legacy, t):
		case slices.Contains(known, t):
			legacy = append(legacy, t)
		default:
			add = append(add, t)
		}
	}
	if len(legacy) > 0 {
		log.Info().Strs("topics", legacy).Msg("topics stored before the subject-tag rule could apply to them keep the TAGS " +
			"their publishers set: a read of one of their subjects reads each of their records (docs/CONFIG.md, subject tags)")
	}
	if len(add) == 0 {
		return s, nil
	}
	next := &Set{topics: make(map[string]struct{}, s.Len()+len(add))}
	for _, t := range append(s.Topics(), add...) {
		next.topics[t] = struct{}{}
	}
	if err := Save(fsys, dir, next); err != nil {
		if vfs.IsNoSpace(err) {
			return next, err
		}
		return s, err
	}
	return next, nil
}

// Save writes s as the set of the store in dir, durably.
func Save(fsys vfs.FS, dir string, s *Set) error {
	if err := fsys.MkdirAll(filepath.Dir(path(dir))); err != nil {
		return fmt.Errorf("subject tags: %w", err)
	}
	if err := meta.Save(fsys, path(dir), file{Topics: s.Topics()}); err != nil {
		return fmt.Errorf("subject tags: %w", err)
	}
	return nil
}

// TagsOf is the TAGS of a message to topic that has tags and subject (its NATS_SUBJECT, "" for
// none): tags, or under the rule the subject, which tags must then be or leave empty. The error
// wraps ErrTagsNotSubject.
func (s *Set) TagsOf(topic, tags, subject string) (string, error) {
	if !s.Has(topic) {
		return tags, nil
	}
	if tags != "" && tags != subject {
		return "", fmt.Errorf("%w: TAGS %.64q is not the message's subject %.64q; put it in another property",
			ErrTagsNotSubject, tags, subject)
	}
	return subject, nil
}

// Code is the tag code of the units of subject's messages in a topic under the rule.
func Code(subject string) int64 { return javahash.TagsCode(subject) }

// Skip reports whether a unit with tag code code, in a topic under the rule, cannot hold a
// message of the subject whose Code is want. A unit without TAGS (code 0) may hold any subject.
func Skip(code, want int64) bool { return code != want && code != 0 }
