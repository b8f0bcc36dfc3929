// Package ingress is the NATS end of the pipeline: it subscribes to NATS subjects, turns every
// message into a RocketMQ CommitLog record ready to append (everything but the three fields the
// single writer stamps), sends the records in batches to the appender, and answers publishers
// that asked for a reply once the store has them.
//
// # Data flow
//
//	nats.go callback (one goroutine per subscription, in arrival order)
//	  | cheap work only: exclude check, subject -> topic (cached), queue id
//	  v  bounded inbox per worker (package inbox), chosen by (topic, queue id)
//	worker (Config.Workers of them, in parallel), takes all its inbox holds at once
//	  | validate headers, build properties, commitlog.AppendRecord (or a template: a pack's
//	  | entries, a subject's plain messages); reject -> error reply now
//	  v  *stages.Batch on Config.Out (bounded, made by the engine)
//	appender -> ... -> ack stage calls Batch.Done -> we publish the replies
//
// # Routing
//
// Where a message goes is package route's: its subject's topic (Config.Mapping: a declared
// topic pattern, else the default or the token rule within the topic limit), its queue (by the
// queue key header's hash, as RocketMQ's SelectMessageQueueByHash, else round-robin per topic;
// under partitioned ingest its partition), and its worker. Routes are cached (SubjectCache).
//
// Ordering: within a queue, the messages of one publisher keep their publish order, provided they
// arrive through one subscription (nats.go delivers a subscription's messages in order on one
// goroutine). The callback hands each message to the worker that owns its (topic, queue id) (a
// hash of the topic plus the queue id, modulo Workers), never round-robin across workers, so one
// queue's messages always pass through the same FIFO inbox and the same worker, which sends its
// batches to Out in order. Two subscriptions are two goroutines: subjects that map to one topic
// keep their relative order only if one subscription covers them. Subjects must not overlap (for
// example ">" and "a.>"): NATS delivers a message once per matching subscription, so it would be
// stored twice. With a QueueGroup, NATS splits a publisher's messages across the group's members,
// so order holds per member only.
//
// # Headers -> properties
//
// NATS_SUBJECT holds the subject; Nats-Msg-Id, the keys and the tags headers become UNIQ_KEY
// (generated when absent, and then not indexed), KEYS and TAGS; every other header is kept under
// its own name. What is refused and why: docs/ARCHITECTURE.md, "Ingress: headers to properties".
//
// # Replies
//
// A message with a reply subject gets one reply (unless Config.NoReply): after the store took it,
// an Ack as JSON (wire.Ack, wire.ParseReply), or an error as {"error":{"code":N,"description":"..."}}
// with the codes of ReplyCode. Fire-and-forget publishers get nothing; core NATS is at-most-once
// before the message reaches us.
//
// # Batched acks
//
// A message with the Rs-Seq header belongs to a publisher's stream (docs/BATCHED-ACKS.md): it
// gets no reply of its own, its stream gets cumulative acks from the tracker instead (package
// batched, fed by Done without ever blocking the ack stage). Packs are split in the callback
// (packs.go). engine/publisher is the client.
//
// # Sources
//
// Where messages come from is a Source (source.go): core NATS subscriptions (the default, all
// of the above), a JetStream stream (Config.JetStream, package jspull) or the replicated
// partitions' streams (Config.Replicated, package replicated), whose messages are acked to their
// streams instead of replied to.
//
// # Back-pressure and drops
//
// Out is bounded. When it is full the workers block and their inboxes fill. A fire-and-forget
// message (no reply subject, no batched-ack header) is never waited for: once the inboxes hold
// Config.PendingMsgs such messages or PendingBytes of them (each counted as the heap it takes,
// headers included), ingress drops it and counts it by topic (Stats.DroppedByTopic), since core NATS has no
// way to slow a publisher that asked for nothing. Any other message waits while its worker's
// inbox holds WorkerQueue of them: the callback blocks, nats.go's pending buffer for the
// subscription fills (bounded by the same pending limits), and then nats.go drops messages and
// flags the subscription as a slow consumer. Request/reply publishers are paced by their acks
// long before that. Drops are counted (Stats.Dropped: ingress's and nats.go's) and logged at most
// once per Config.LogInterval with the count since the last line, the rate and the topics that
// lost most, never once per message and never silently. The memory ingress holds is bounded by
// the pending limits in its inboxes and again per subscription in nats.go; per worker,
// WorkerQueue jobs that wait (a message, or a run of at most MaxBatch entries of one pack); and
// MaxBatch records per batch on Out.
//
// # Stopping
//
// Stop is the graceful stop (every subscription drained, then the workers finish and Run
// returns); cancelling Run's context is the abort (every message held is answered with 503).
// Ingress never closes Out nor the connection. The details: docs/ARCHITECTURE.md, "Ingress:
// stopping and aborting".
package ingress
