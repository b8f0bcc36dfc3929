package replicated

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errCodeClusterNoPeers is JetStream's "no suitable peers for placement" (nats-server's
// JSClusterNoPeersErrF); nats.go names no constant for it.
const errCodeClusterNoPeers jetstream.ErrorCode = 10005

// RetryPlacement runs create (a stream's or a bucket's creation) again while JetStream answers
// that it has no suitable peers for the replicas asked: a cluster that has just started does not
// know every server's state yet. It gives up when ctx ends, or after a minute.
func RetryPlacement[T any](ctx context.Context, create func() (T, error)) (T, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := create()
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeClusterNoPeers ||
			time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return v, err
		}
	}
}
