package publisher

import "github.com/rocketstore/engine/internal/wire"

// The wire protocol (docs/BATCHED-ACKS.md) is internal/wire's, which the engine's ingress speaks
// too; the names below are its, re-exported for this package's users.

// HeaderSeq is the header every message of a stream carries:
//
//	Rs-Seq: <stream> <seq> <acked>[ r]
//
// stream is the stream id (1 to 64 bytes of [A-Za-z0-9_-]), seq the message's sequence number
// (1, 2, 3... in publish order), acked the publisher's floor (every sequence up to it has been
// answered to the publisher), and r marks a resend. The message's reply subject is the stream's
// ack subject.
const HeaderSeq = wire.HeaderSeq

// MaxStreamID bounds a stream id's length.
const MaxStreamID = wire.MaxStreamID

// HeaderPack is the header of a pack: its entry count.
const HeaderPack = wire.HeaderPack

// MaxPackEntries is the most entries the engine takes in one pack; Options.MaxPack is held to it.
const MaxPackEntries = wire.MaxPackEntries

// MaxSeq is the last sequence of a stream (the engine takes 1 to 2^63-1). A publisher that has
// numbered it refuses every further Publish with ErrStreamExhausted.
const MaxSeq = wire.MaxSeq
