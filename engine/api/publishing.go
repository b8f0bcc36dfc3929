package api

import "github.com/rocketstore/engine/internal/wire"

// The publishing protocol (internal/wire, docs/BATCHED-ACKS.md), for programs outside this module:
// the reply a plain message gets, the error reply's codes, and the batched acks. The engine and
// its Go publisher (engine/publisher) speak it through internal/wire; these are its names.

// Ack is the reply to a stored message (see wire.Ack).
type Ack = wire.Ack

// ReplyError is the reply to a message that was not stored (see wire.ReplyError).
type ReplyError = wire.ReplyError

// BatchAck is a batched ack, with its runs of stored and refused messages (see wire.BatchAck).
type (
	BatchAck   = wire.BatchAck
	StoredRun  = wire.StoredRun
	RefusedRun = wire.RefusedRun
)

// Headers and bounds of batched publishing (see docs/BATCHED-ACKS.md).
const (
	HeaderSeq      = wire.HeaderSeq
	HeaderPack     = wire.HeaderPack
	MaxStreamID    = wire.MaxStreamID
	MaxPackEntries = wire.MaxPackEntries
)

// Codes of error replies to published messages besides the read API's (CodeInternal and
// CodeUnavailable are the same numbers in both).
const (
	CodeInvalid  = wire.CodeInvalid
	CodeTooLarge = wire.CodeTooLarge
	CodeDiskFull = wire.CodeDiskFull
)

// ParseReply decodes the reply to a published message: an Ack, or a *ReplyError as the error.
func ParseReply(data []byte) (Ack, error) { return wire.ParseReply(data) }

// ParseBatchAck decodes a batched ack; a plain reply is an error.
func ParseBatchAck(data []byte) (BatchAck, error) { return wire.ParseBatchAck(data) }
