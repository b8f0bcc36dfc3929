package benchmarks

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
)

// verifyStoreWithDrops is verifyEngineStore for a run that tolerates drops (Run.TolerateDrops).
// Which messages nats.go dropped nobody knows, so the publishers' tally cannot be compared with
// the store's; instead every body the CommitLog holds is checked against what its publisher
// claims to have sent (sentSet): a message of a publisher below its count, with its body intact,
// at most once. The distinct messages must then number exactly what was sent less what the
// engine says it dropped, and the ConsumeQueues must name exactly those (tallies of the same
// records). problems are the engine's own, which verifyEngineStore found.
func verifyStoreWithDrops(ctx context.Context, in VerifyInput, problems []string) (Tally, []string) {
	set := newSentSet(in.Run.Load.BodySize, in.SentBy)
	st, err := readStoreWith(ctx, storeDir(in.Dir), in.Run.Target.CommitLogSize, set.add)
	if err != nil {
		return set.found, append(problems, "reading the store back: "+err.Error())
	}
	problems = append(problems, set.problems()...)
	if d := in.Target.Preloaded.Diff(set.preload); d != "" {
		problems = append(problems, "commitlog, the preloaded messages: "+d)
	}
	var dropped int64
	if in.Target.Engine != nil {
		dropped = in.Target.Engine.Dropped
	}
	if want := in.Sent.Count - dropped; set.found.Count != want {
		problems = append(problems, fmt.Sprintf("commitlog: %d distinct messages stored, %d sent less %d dropped is %d: %s",
			set.found.Count, in.Sent.Count, dropped, want, uncounted(want-set.found.Count)))
	}
	if d := set.found.Diff(in.preloadedOut(st.Queues)); d != "" {
		problems = append(problems, "consumequeues, against the commitlog: "+d)
	}
	return set.found, problems
}

// sentSet takes the bodies a store holds, one at a time, and checks each against what the
// publishers sent: publisher p sent the bodies of sequence numbers seqOf(p, i), i below
// sentBy[p], each of the load's body size with p's filler (newBody). It keeps a bit per message
// sent, so that a message found twice is caught, and counts the target's own preloaded bodies
// apart.
type sentSet struct {
	size   int
	sentBy []int64
	filler [][]byte   // by publisher: its body with sequence number 0
	seen   [][]uint64 // by publisher: a bit per message it sent

	found   Tally // the distinct messages of the publishers
	preload Tally // the target's own (publisher index preloadPub)
	// dups, foreign and altered count the bodies found again, of no message sent, and changed;
	// examples are the first few of them.
	dups, foreign, altered int64
	examples               []string
}

// maxExamples bounds the examples a sentSet keeps.
const maxExamples = 3

func newSentSet(size int, sentBy []int64) *sentSet {
	s := &sentSet{size: size, sentBy: sentBy}
	for p, n := range sentBy {
		s.filler = append(s.filler, newBody(size, p))
		s.seen = append(s.seen, make([]uint64, (n+63)/64))
	}
	return s
}

// add checks and counts one body.
func (s *sentSet) add(b []byte) {
	if len(b) < 8 {
		s.note(&s.altered, "a %d-byte body", len(b))
		return
	}
	seq := binary.BigEndian.Uint64(b)
	pub, n := int(seq>>seqBits), int64(seq&(1<<seqBits-1))
	switch {
	case pub == preloadPub:
		s.preload.Add(b)
		return
	case pub >= len(s.sentBy) || n >= s.sentBy[pub]:
		s.note(&s.foreign, "message %d of publisher %d, which was never sent", n, pub)
		return
	case len(b) != s.size || !bytes.Equal(b[8:], s.filler[pub][8:]):
		s.note(&s.altered, "message %d of publisher %d altered (%d bytes)", n, pub, len(b))
		return
	}
	w, bit := n/64, uint64(1)<<(n%64)
	if s.seen[pub][w]&bit != 0 {
		s.note(&s.dups, "message %d of publisher %d stored again", n, pub)
		return
	}
	s.seen[pub][w] |= bit
	s.found.Add(b)
}

func (s *sentSet) note(count *int64, format string, args ...any) {
	*count++
	if len(s.examples) < maxExamples {
		s.examples = append(s.examples, fmt.Sprintf(format, args...))
	}
}

// problems says what add found wrong, with examples.
func (s *sentSet) problems() []string {
	if s.dups == 0 && s.foreign == 0 && s.altered == 0 {
		return nil
	}
	return []string{fmt.Sprintf("commitlog: %d duplicates, %d messages never sent, %d altered (%s)",
		s.dups, s.foreign, s.altered, strings.Join(s.examples, "; "))}
}
