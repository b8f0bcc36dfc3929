// Package wire is the publishing protocol between NATS publishers and the engine, defined once:
// the plain ack and error reply JSON with their reply codes (reply.go), the batched-ack header
// Rs-Seq (seq.go), the pack framing Rs-Pack (pack.go) and the batched ack JSON (batchack.go).
// The engine's ingress (stages/ingress and its children) and the Go client (engine/publisher)
// both speak it through this package, so the two sides cannot drift apart; engine/api
// re-exports what public users need. docs/BATCHED-ACKS.md describes the protocol in prose.
//
// It depends on the standard library and nats.go's Header and Msg types only. Every decoder here
// reads bytes from the network and has a fuzz target with its seed corpus in testdata/fuzz.
//
// Errors of the engine-side decoders (ParseSeqHeader, ParsePackCount, SplitPack) are
// *ProtocolError: their text says what is wrong without a package prefix, because the engine
// quotes it in its refusals (wrapped in its own error), and their ReplyCode is CodeInvalid.
package wire

import (
	"errors"
	"fmt"
)

// ProtocolError is input that breaks the protocol: a malformed Rs-Seq or Rs-Pack header, or a
// pack body that does not split. The engine refuses such a message with CodeInvalid.
type ProtocolError struct {
	// Detail says what is wrong and what was expected.
	Detail string
	// Err is the cause, when a decoder underneath failed (a pack entry's header block).
	Err error
}

// Error returns the detail.
func (e *ProtocolError) Error() string { return e.Detail }

// ReplyCode is CodeInvalid: the publisher sent something the protocol does not allow.
func (e *ProtocolError) ReplyCode() int { return CodeInvalid }

// Unwrap returns the cause, if any.
func (e *ProtocolError) Unwrap() error { return e.Err }

// protocolErrorf formats a *ProtocolError; a %w verb names its cause.
func protocolErrorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &ProtocolError{Detail: err.Error(), Err: errors.Unwrap(err)}
}
