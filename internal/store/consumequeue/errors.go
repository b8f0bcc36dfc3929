package consumequeue

import "errors"

var (
	// ErrGap is returned by Put when the unit's queue offset lies past the end of a non-empty
	// queue. RocketMQ logs a BUG and appends at the end anyway, which files the unit under the
	// wrong offset; here the dispatcher stops instead, because a gap means lost dispatch upstream.
	ErrGap = errors.New("consumequeue: gap before queue offset")
	// ErrOutOfRange is returned for a queue offset outside [MinOffset, MaxOffset).
	ErrOutOfRange = errors.New("consumequeue: queue offset out of range")
	// ErrClosed is returned by every operation on a closed queue or store.
	ErrClosed = errors.New("consumequeue: closed")
	// ErrBadName is returned for a topic name or queue id that cannot be a directory name.
	ErrBadName = errors.New("consumequeue: bad topic or queue id")
	// ErrInvalidUnit is returned by Put for a unit that recovery would not take as valid
	// (negative offset, size <= 0) or whose end overflows.
	ErrInvalidUnit = errors.New("consumequeue: invalid unit")
	// ErrReadOnly is returned by the writer-side operations of a Store opened with
	// Options.ReadOnly, and by its file system for any change.
	ErrReadOnly = errors.New("consumequeue: read-only")
)
