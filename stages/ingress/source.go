package ingress

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/replicated"
)

// Source is where messages come from. There are three: core NATS subscriptions (coreSource,
// subs.go: the default, with replies, batched acks and partitions), a JetStream stream through a
// durable pull consumer (jsSource, jetstream.go: Config.JetStream) and the replicated
// partitions' streams (replSource, replsource.go, and package replicated: Config.Replicated).
// New picks one; from there on ingress asks the source, never which source it is, at each point
// where they differ: how a message of it becomes a record, how the records' outcomes and the
// refusals are answered, and how it starts and stops. It is implemented in this package only.
type Source interface {
	// start starts taking messages (they reach the workers from then on) and returns once the
	// source is live (the server has the subscriptions), or why it cannot be.
	start(ctx context.Context) error
	// stop stops taking messages and returns once none reaches the workers any more: gracefully
	// while ctx lasts, at once (the callbacks answer 503 instead of waiting) once it ends;
	// cancel is Run's, for a source that turns a graceful stop into the abort.
	stop(ctx context.Context, cancel context.CancelFunc)
	// record adds the record(s) of j, a message of this source, to the batch b being built, or
	// answers j at once (a refusal, a duplicate found in the store).
	record(w *worker, b *batchBuild, j *job)
	// done is every batch's Done: the ack stage calls it once the records reached the promised
	// durability (or failed), and it answers each. It recycles b, or hands it on.
	done(b *stages.Batch)
	// refuse answers a message refused before it reached the store (code is ReplyCode(err)).
	refuse(m *nats.Msg, code int, err error)
	// abandon answers j, which ingress held when it aborted (nothing of it was stored).
	abandon(j *job)
	// durable says the source acks its own stream, so its batches are acked only once durable
	// here, whatever the flush mode (Batch.Durable).
	durable() bool
	// addPartition and removePartition move a partition here or away (handoff.go).
	addPartition(ctx context.Context, part int) error
	removePartition(ctx context.Context, part int) error
}

// newSource is the source cfg asks for.
func newSource(in *Ingress) Source {
	switch {
	case in.cfg.JetStream != nil:
		return &jsSource{in: in, src: in.cfg.JetStream}
	case in.cfg.Replicated != nil:
		s := &replSource{in: in}
		s.src = replicated.New(in.cfg.Replicated, in.cfg.Partitions, in.cfg.Conn, in.log, s)
		return s
	}
	return &coreSource{in: in}
}

// ReplicatedReady is nil when, in replicated mode, this engine consumes what it should (see
// replicated.Source.Ready), else why not (for /readyz). Always nil outside replicated mode.
func (in *Ingress) ReplicatedReady() error { return in.repl.Load().Ready() }

// ReplicatedStarted is closed, in replicated mode, once every partition's stream and consumer
// are open and the partitions have been spread over the live engines; at once otherwise.
func (in *Ingress) ReplicatedStarted() <-chan struct{} { return in.repl.Load().Started() }

// ReplicatedTaken are, in replicated mode, the partitions the live engines' assignment gives this
// engine, ascending (nil otherwise): the ones it pulls.
func (in *Ingress) ReplicatedTaken() []int { return in.repl.Load().Taken() }

// ReplicatedEngines are, in replicated mode, the names of the live engines of the consumer (this
// one included) as the partitions were last spread (nil otherwise).
func (in *Ingress) ReplicatedEngines() []string { return in.repl.Load().Engines() }

// ReplicatedFloors are, in replicated mode, each consumed partition's floor: the stream sequence
// up to which everything is durable here (and acked to the consumer); nil otherwise.
func (in *Ingress) ReplicatedFloors() map[int]uint64 { return in.repl.Load().Floors() }
