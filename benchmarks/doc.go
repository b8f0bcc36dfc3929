// Package benchmarks is the ingest benchmark harness behind `engine bench`: it measures the
// engine, its ceilings and its baselines (JetStream's file store, a Kafka-style per-topic log,
// the disk itself) under the same publisher load, in the same invocation, and states the
// engine's figures as ratios to the ceilings' and JetStream's. See README.md for how to run it
// and read it.
//
// # Processes
//
// The harness (the parent, a Runner) runs the runs one after another. Each run has two child
// processes, both the same binary re-executed (`engine bench --child=target|publish`):
//
//	parent (Runner) --stdin/stdout JSON lines--> target child: Scenario.New -> Target
//	                --stdin/stdout JSON lines--> publisher child: Publish
//
// so that the target's CPU time and peak RSS are its own, the publishers' are theirs, and
// neither includes the harness or an earlier run. Everything is on the loopback interface.
//
// # One run
//
//  1. The parent makes a scratch directory and starts the target child, which starts its
//     target (an embedded nats-server and a subscriber, engine.Serve on a fresh store in the
//     directory, JetStream with a stream, a per-topic log writer) and reports its URL. Store
//     targets make their topics' files first (the preload), outside the measurement.
//  2. The parent starts the publisher child with the URL and the Load. It connects P
//     publishers, starts the clock, publishes (fire-and-forget, request/reply with a window of W
//     per publisher, or, to an engine, batched acks through engine/publisher with a window of W,
//     optionally rate-limited), and reports a Tally of what it sent, its replies and their
//     latency histogram.
//  3. The parent tells the target how many messages were sent; the target waits until it holds
//     them all (event-driven, with a stall timeout), stops cleanly (the engine drains and
//     closes its store) and reports its counters and its CPU time over the measurement.
//  4. The parent runs the scenario's Verify: the ceilings' tallies must equal the publishers';
//     an engine's store is read back read-only (every CommitLog record with its CRCs, every
//     ConsumeQueue unit against its record), JetStream's stream through a restarted server,
//     kafka-style's topic files record by record; each must hold exactly the bodies sent. Any
//     difference, drop, error reply, missing reply or failed process makes the Result invalid.
//     A run that tolerates drops (Run.TolerateDrops: issue 18's, with nats.go's default pending
//     limits) reports them instead: its store must hold exactly the messages sent less the
//     dropped ones, each once, checked message by message (sentSet).
//
// A self-loaded scenario (the disk ceiling) has no publisher child: its target makes its own
// load in Await and reports it.
//
// Besides its rate, a run reports its target's peak heap in use (sampled in the target child),
// its peak RSS and, in fire-and-forget, the lag from the last publish to the last message held,
// both children reading the machine's monotonic clock (clock.go). The rounds of a series (Run.Round,
// interleaved by the preset) are summed up as medians (RoundSeriesOf).
//
// Ratios are computed last, from the valid runs of the same invocation (computeRatios, which
// pairs runs by Load.Key, a batched run with the fire-and-forget ceiling and JetStream's
// request/reply of its load: referenceLoad); the report then checks the issues' goals
// (CheckGoals) and draws the charts (WriteCharts). Presets (presets.go) build the runs; a rough
// model (estimate.go) sizes the slow targets' runs and tells how long an invocation takes.
//
// # Consumer groups
//
// Issue 28's preset (issue28*.go, `engine bench --preset issue28`) reads instead of ingesting,
// and has an orchestration of its own: the engine as an `engine run` process, each member,
// reader, publisher and peer a child of its own role (g28-*, JSON lines as above), members
// killed with SIGKILL; its report states each figure against JetStream's pull consumer, the
// storage-free responder or a plain NATS subscriber of the same invocation (README.md).
//
// # Extending
//
// A new target is a Scenario (scenario.go) registered from its own file; a new load is a Load;
// a new figure is a field of Result and a column (output.go); a new sweep is a preset that
// builds Runs. The runner, the child protocol and the writers do not change.
package benchmarks
