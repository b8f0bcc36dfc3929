package benchmarks

import "github.com/rocketstore/engine/stages/ingress/route"

// Issue 19's runs (subjects as NATS users have them): plain publishes over 1 to 1,000,000
// distinct subjects, the engine with one declared topic for the whole space (TargetOptions.Topics
// bench.>) cold and warm, with a topic per subject (the rule without a limit) up to 10,000
// subjects, out of the box past 1,024 subjects (the default topic limit, cold), and JetStream (one stream, any number of subjects) on the same loads. Each run is
// at least two messages per subject: the first pass makes every subject new to the target,
// the second is a steady load over all of them.
const (
	// issue19Burst is each run's messages at the least: issue 18's 1.6 M burst.
	issue19Burst = 1_600_000
	// issue19PerSubjectTopics is the widest load stored with a topic per subject: 100,000
	// topics would be 400,000 ConsumeQueue files.
	issue19PerSubjectTopics = 10_000
)

// issue19Subjects are the subject counts of the runs.
var issue19Subjects = []int{1, 16, 10_000, 100_000, 1_000_000}

// issue19 builds the preset of issue 19 (see the file's doc).
func (p *presetBuilder) issue19() {
	p.group = "subjects"
	for _, n := range issue19Subjects {
		l := p.base
		l.Topics = n
		msgs := int64(max(issue19Burst, 2*n))
		// JetStream stores in the server: nothing to drop in a client, so no tolerated drops.
		js := p.ff("jetstream-default", l, msgs)
		js.Load.Messages = max(js.Load.Messages, 2*int64(n))
		for _, cold := range []bool{true, false} {
			r := p.dropFF("engine-sync", l, msgs, 0, 0, cold)
			r.ID += "/declared"
			r.Target.Topics = []string{SubjectPrefix + ".>"}
			if n <= issue19PerSubjectTopics {
				p.dropFF("engine-sync", l, msgs, 0, 0, cold)
			}
		}
		if n > route.DefaultMaxTopics {
			// engine run out of the box: nothing declared, the default topic limit.
			r := p.dropFF("engine-sync", l, msgs, 0, 0, true)
			r.ID += "/limit"
			r.Target.TopicLimit = true
		}
	}
}
