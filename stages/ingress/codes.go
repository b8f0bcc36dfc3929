package ingress

import (
	"context"
	"errors"
	"syscall"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Errors ingress returns for a message it refuses, always wrapped with the detail.
var (
	// ErrInvalidHeader: a header cannot become a property without loss; see the package doc.
	ErrInvalidHeader = errors.New("ingress: invalid header")
	// ErrUnavailable: the store is not taking writes (not ready, closed, refusing writes). Stages
	// that refuse a record may wrap it, or give their error a ReplyCode method (see ReplyCode).
	ErrUnavailable = errors.New("ingress: store unavailable")
	// ErrStopped: ingress stopped (an abort) before the store took the message.
	ErrStopped = errors.New("ingress: stopped before the message was stored")
)

// codes lists the reply codes in the order of Stats' per-code arrays.
var codes = [...]int{wire.CodeInvalid, wire.CodeTooLarge, wire.CodeInternal, wire.CodeUnavailable, wire.CodeDiskFull}

// codeIndex is the index of code in codes.
func codeIndex(code int) int {
	for i, c := range codes {
		if c == code {
			return i
		}
	}
	return 2 // wire.CodeInternal
}

// ReplyCoder lets an error from any stage choose its reply code without that stage importing
// ingress (stages never import one another): ReplyCode asks the first error in the chain that has
// the method.
type ReplyCoder interface {
	error
	ReplyCode() int
}

// ReplyCode maps an error to the code of its error reply. It is the one place this mapping lives:
//
//   - an error in the chain with a ReplyCode() int method: that code
//   - 400: route.ErrInvalidSubject, ErrInvalidHeader, commitlog.ErrInvalidTopic, ErrInvalidProperty,
//     ErrPropertiesTooLarge (the headers are what is too large: invalid input, not a big body)
//   - 413: commitlog.ErrBodyTooLarge, ErrRecordTooLarge, ErrTooLarge (bigger than a segment)
//   - 507: syscall.ENOSPC anywhere in the chain (checked before 503: a full disk says more)
//   - 503: ErrUnavailable, ErrStopped, stages.ErrClosed, context.Canceled, DeadlineExceeded
//   - 500: anything else, and nil (a reply for "no error" is a bug)
func ReplyCode(err error) int {
	if err == nil {
		return wire.CodeInternal
	}
	if rc, ok := errors.AsType[ReplyCoder](err); ok {
		return rc.ReplyCode()
	}
	switch {
	case errors.Is(err, route.ErrInvalidSubject), errors.Is(err, ErrInvalidHeader),
		errors.Is(err, commitlog.ErrInvalidTopic), errors.Is(err, commitlog.ErrInvalidProperty),
		errors.Is(err, commitlog.ErrPropertiesTooLarge):
		return wire.CodeInvalid
	case errors.Is(err, commitlog.ErrBodyTooLarge), errors.Is(err, commitlog.ErrRecordTooLarge),
		errors.Is(err, commitlog.ErrTooLarge):
		return wire.CodeTooLarge
	case errors.Is(err, syscall.ENOSPC):
		return wire.CodeDiskFull
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrStopped), errors.Is(err, stages.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return wire.CodeUnavailable
	}
	return wire.CodeInternal
}
