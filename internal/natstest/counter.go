package natstest

import (
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
)

// CountTo subscribes nc to subject and returns a channel closed once want messages have come.
// The subscription buffers without limit (a fire-and-forget burst must not be dropped as a slow
// consumer) and is known to the server when CountTo returns.
func CountTo(tb testing.TB, nc *nats.Conn, subject string, want int64) <-chan struct{} {
	tb.Helper()
	done := make(chan struct{})
	var got atomic.Int64
	sub, err := nc.Subscribe(subject, func(*nats.Msg) {
		if got.Add(1) == want {
			close(done)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return done
}
