package replicated

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// What replicated mode reports of itself: readiness (the engine waits, never exits, for a
// JetStream cluster that is still forming), the partitions taken here and the live engines.

// permanentJetStream are the JetStream API errors about the partitions' streams and consumers
// that retrying cannot cure: configurations JetStream refuses, and accounts without JetStream or
// with no room for the streams. Anything else (timeouts, no responders, no meta leader yet, no
// suitable peers yet, a stream or consumer offline) is what a cluster still forming, or
// recovering, answers.
var permanentJetStream = []jetstream.ErrorCode{
	10039, // JetStream not enabled for account
	10052, // invalid stream configuration
	10065, // subjects overlap with an existing stream
	10074, // replicas > 1 not supported in non-clustered mode
	10061, // replicas configuration can not be updated
	10026, // maximum consumers limit reached
	10027, // maximum number of streams reached
	10113, // account requires a stream config to have max bytes set
	10120, // no JetStream default or applicable tiered limit present
	10121, // consumer max ack pending exceeds system limit
	10122, // stream max bytes exceeds account limit
}

// isPermanentJetStream reports whether err is one of permanentJetStream.
func isPermanentJetStream(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && slices.Contains(permanentJetStream, apiErr.ErrorCode)
}

// Ready is nil when, in replicated mode, this engine consumes what it should: every
// partition's stream and consumer open, the other engines of the consumer found and the
// partitions spread, and no partition taken here failing. Otherwise it says why not (for
// /readyz). Always nil outside replicated mode.
func (r *Source) Ready() error {
	if r == nil {
		return nil
	}
	r.stateMu.Lock()
	fatal := r.fatal
	r.stateMu.Unlock()
	if fatal != nil {
		return fmt.Errorf("replicated: %w", fatal)
	}
	var waiting, failing []int
	var openErr, failErr error
	for _, p := range slices.Sorted(maps.Keys(r.parts)) {
		rp := r.parts[p]
		rp.mu.Lock()
		if !rp.opened {
			waiting = append(waiting, p)
			if openErr == nil {
				openErr = rp.openErr
			}
		} else if rp.failing != nil && rp.assigned.Load() {
			failing = append(failing, p)
			if failErr == nil {
				failErr = rp.failing
			}
		}
		rp.mu.Unlock()
	}
	switch {
	case len(waiting) > 0:
		why := "not tried yet"
		if openErr != nil {
			why = openErr.Error()
		}
		return fmt.Errorf("replicated: waiting for JetStream: %d of %d partitions' streams and consumers not open yet (%s)",
			len(waiting), len(r.parts), why)
	case !isClosed(r.settled):
		return errors.New("replicated: finding the other engines of the partitions")
	case len(failing) > 0:
		return fmt.Errorf("replicated: %d partitions taken here stopped (partition %d: %v); retrying", len(failing), failing[0], failErr)
	}
	return nil
}

// Started is closed, in replicated mode, once every partition's stream and consumer
// are open and the partitions have been spread over the live engines (messages published then
// are taken); at once otherwise.
func (r *Source) Started() <-chan struct{} {
	if r == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return r.started
}

// Taken are, in replicated mode, the partitions the live engines' assignment gives this
// engine, ascending (nil otherwise): the ones it pulls.
func (r *Source) Taken() []int {
	if r == nil {
		return nil
	}
	out := []int{}
	for p, rp := range r.parts {
		if rp.assigned.Load() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Engines are, in replicated mode, the names of the live engines of the consumer (this
// one included) as the partitions were last spread (nil otherwise).
func (r *Source) Engines() []string {
	if r == nil {
		return nil
	}
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	return slices.Clone(r.live)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
