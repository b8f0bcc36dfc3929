// Package inbox is an ingress worker's queue of jobs (Inbox): many putters, one taker that takes
// all at once, with the two bounds ingress's back-pressure and drops are made of.
package inbox

import "sync"

// Item is a job of an Inbox: FFCost is what it counts against the fire-and-forget bounds, 0 for
// a job that may wait.
type Item interface{ FFCost() int64 }

// Inbox is a worker's queue of jobs: the callbacks and the sources put, the worker takes all that
// is queued at once (a lock and a slice swap, where a channel cost an operation per message on
// both sides). It holds two bounds:
//   - Jobs that may wait (a message with a reply, a batched-ack stream's, a pack's run, a
//     JetStream message, a fence): a put waits while WorkerQueue of them are queued. That is the
//     back-pressure on their callbacks, which nats.go then buffers up to its pending limits.
//   - Fire-and-forget messages (no reply subject, no batched-ack header): nobody is waiting for
//     them, and a callback that waited would only move the queue into nats.go, which drops
//     without saying what. They are never waited for: past the worker's share of PendingMsgs and
//     PendingBytes (FFCost each) the put is refused, and the caller drops the message and counts
//     it by topic.
//
// Counts include what the worker took and has not finished (done), so the bounds hold for the
// messages between the callbacks and the batches sent to Out.
type Inbox[T Item] struct {
	mu sync.Mutex
	q  []T // guarded by mu
	// waiting counts the jobs that may wait, ffMsgs and ffBytes the fire-and-forget messages
	// and their cost, in q or taken and not done. All guarded by mu.
	waiting, ffMsgs, ffBytes int64
	// space, when not nil, is closed by done so that puts waiting for room look again.
	space chan struct{} // guarded by mu
	wake  chan struct{} // capacity 1: a job was put since the worker last looked (Wake)
	// maxWaiting, maxFFMsgs and maxFFBytes are the bounds; a negative ff bound is no limit.
	maxWaiting, maxFFMsgs, maxFFBytes int64
}

// New is an inbox with those bounds: maxWaiting jobs that may wait, and maxFFMsgs fire-and-forget
// messages of maxFFBytes (a negative one: no limit).
func New[T Item](maxWaiting int, maxFFMsgs, maxFFBytes int64) *Inbox[T] {
	return &Inbox[T]{wake: make(chan struct{}, 1), maxWaiting: int64(maxWaiting), maxFFMsgs: maxFFMsgs, maxFFBytes: maxFFBytes}
}

// signal wakes the worker if it is not awake already.
func (b *Inbox[T]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// PutFF puts the fire-and-forget message j (its FFCost above 0) unless that would take the
// inbox past its fire-and-forget bounds; it never waits. An empty inbox always takes it, so that
// a message larger than the bound alone is stored rather than dropped for its size.
func (b *Inbox[T]) PutFF(j T) bool {
	cost := j.FFCost()
	b.mu.Lock()
	if b.waiting+b.ffMsgs > 0 && ((b.maxFFMsgs >= 0 && b.ffMsgs+1 > b.maxFFMsgs) || (b.maxFFBytes >= 0 && b.ffBytes+cost > b.maxFFBytes)) {
		b.mu.Unlock()
		return false
	}
	b.q = append(b.q, j)
	b.ffMsgs++
	b.ffBytes += cost
	b.mu.Unlock()
	b.signal()
	return true
}

// TryPut puts j if fewer than maxWaiting jobs that may wait are queued; it never waits.
func (b *Inbox[T]) TryPut(j T) bool {
	b.mu.Lock()
	if b.waiting >= b.maxWaiting {
		b.mu.Unlock()
		return false
	}
	b.q = append(b.q, j)
	b.waiting++
	b.mu.Unlock()
	b.signal()
	return true
}

// Put puts j, waiting while maxWaiting jobs that may wait are queued; it returns false if stop or
// abort is closed first (nil channels never are).
func (b *Inbox[T]) Put(j T, stop, abort <-chan struct{}) bool {
	for {
		b.mu.Lock()
		if b.waiting < b.maxWaiting {
			b.q = append(b.q, j)
			b.waiting++
			b.mu.Unlock()
			b.signal()
			return true
		}
		if b.space == nil {
			b.space = make(chan struct{})
		}
		space := b.space
		b.mu.Unlock()
		select {
		case <-space:
		case <-stop:
			return false
		case <-abort:
			return false
		}
	}
}

// Take moves every queued job to the worker: it returns them in a slice and keeps spare (the
// worker's last one, emptied) as the queue.
func (b *Inbox[T]) Take(spare []T) []T {
	b.mu.Lock()
	got := b.q
	b.q = spare[:0]
	b.mu.Unlock()
	return got
}

// Done says the worker finished jobs (taken before): their room is free again.
func (b *Inbox[T]) Done(jobs []T) {
	var waiting, ffMsgs, ffBytes int64
	for i := range jobs {
		if c := jobs[i].FFCost(); c > 0 {
			ffMsgs++
			ffBytes += c
		} else {
			waiting++
		}
	}
	b.mu.Lock()
	b.waiting -= waiting
	b.ffMsgs -= ffMsgs
	b.ffBytes -= ffBytes
	if b.space != nil && waiting > 0 {
		close(b.space)
		b.space = nil
	}
	b.mu.Unlock()
}

// Depth is how many jobs are queued or being worked on.
func (b *Inbox[T]) Depth() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.waiting + b.ffMsgs)
}

// HeldFF is how many fire-and-forget messages the inbox holds (queued, or taken and not done)
// and what they count against its byte bound.
func (b *Inbox[T]) HeldFF() (msgs, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ffMsgs, b.ffBytes
}

// Wake receives when a job was put since the worker last received from it.
func (b *Inbox[T]) Wake() <-chan struct{} { return b.wake }
