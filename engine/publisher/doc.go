// Package publisher publishes to a rocketstore engine with batched acks: instead of one reply
// per message, the engine sends each publisher's stream one cumulative ack per round ("every
// sequence up to N is stored", with the position of each message stored since the last ack,
// the sequences it refused, and the sequences it never received). The protocol is in
// docs/BATCHED-ACKS.md; this package is its Go implementation, with nothing but nats.go under it.
//
//	nc, _ := nats.Connect(url)
//	p, _ := publisher.New(nc, publisher.Options{}) // a random stream id, a window of 4096
//	defer p.Close(ctx)                             // waits for the last acks
//	for _, order := range orders {
//		f, err := p.Publish(ctx, "orders.eu", order, nil) // waits only while the window is full
//		...
//	}
//	if err := p.Flush(ctx); err != nil { // every message acked, or *FailedError says which not
//		...
//	}
//	a, err := f.Wait(ctx) // Ack{Seq, MsgID, Topic, QueueID, QueueOffset, Duplicate}
//
// # What an ack means
//
// A future resolves with an Ack only once the engine has the message at its promised level
// (sync mode, the default: on disk; async mode: written). It resolves with a *RefusedError when
// the engine refused the message (nothing was stored; 503 and 507 are retried RetryDelay later
// first), and with ErrNotAcked after MaxRetries resends without an answer, or ErrClosed when
// Close gave up: those two mean "not known", the message may or may not be stored.
//
// # Resends and exactly once
//
// Every message is numbered in its stream (1, 2, 3...). A message the engine reports missing
// (it never reached it, for instance dropped by NATS as a slow consumer), or one not answered
// within AckTimeout, is sent again with the same sequence, so with the same message id
// ("<stream>:<seq>", or its Nats-Msg-Id), flagged as a resend. The engine stores the first copy
// of a sequence that reaches it and answers every other copy with that one's position; a resend
// of a message stored before the engine restarted is found in its IndexFile. So a message
// acknowledged is stored exactly once, including across engine restarts, provided that the
// stream keeps publishing to one engine (no queue group), in sequence order over one
// connection, and that the stream id is never reused (see Options.StreamID and the guarantee
// in docs/BATCHED-ACKS.md).
//
// # Window
//
// Publish blocks (until ctx ends) while the message would be Window sequences or more past the
// oldest unanswered one. The window bounds what the publisher keeps for resending and what the
// engine tracks of the stream; at Window messages in flight a publisher runs at Window / ack
// latency messages per second, so size it to the rate times the sync latency, with room.
//
// # Packs
//
// By default consecutive messages of one subject go out as one NATS message (a pack, split again
// by the engine), which removes most of NATS's cost per message: see Options.MaxPack and
// docs/BATCHED-ACKS.md. A message is numbered when its pack is sent, so Future.Seq is 0 until
// then. MaxPack 1 sends one NATS message per message.
//
// # For benchmarks
//
// A load generator needs: one Publisher per simulated producer (its own stream; a connection may
// carry several), Options.Window as its window, Options.OnResult to take each message's outcome
// and latency (called on the publisher's goroutines as each future resolves; Future.Published is
// when Publish took it), Flush at the end, and Stats for resends, packs and failures. The engine
// side reports its half in ingress.Stats.Batched (acks sent, streams, missing, resends found in
// the store, packs).
package publisher
