package benchmarks

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A plain NATS subscriber on the load's subject, beside a tailing member: the reference of
// issue 28's tailing goal. It gets the same messages at the same time from the engine's server,
// and records each one's publish-to-subscriber latency (the publish time is in the body, on the
// machine's monotonic clock).

// g28SubConfig configures the subscriber.
type g28SubConfig struct {
	URL     string `json:"url"`
	Subject string `json:"subject"`
	// After: only messages published from then on (monotonic ns) are counted.
	After int64 `json:"after"`
}

// g28SubResult: what it received and the latency histogram (encoded, µs).
type g28SubResult struct {
	Got     Tally  `json:"got"`
	Latency string `json:"latency"`
	Usage   Usage  `json:"usage"`
}

func g28SubMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28SubConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("bench-sub"))
	if err != nil {
		return err
	}
	defer nc.Close()
	var mu sync.Mutex
	var got Tally
	hist := newLatencyHistogram()
	sub, err := nc.Subscribe(cfg.Subject, func(m *nats.Msg) {
		now := machineMonotonic(time.Now())
		mu.Lock()
		defer mu.Unlock()
		if len(m.Data) < 16 {
			return
		}
		if sent := int64(binary.BigEndian.Uint64(m.Data[8:])); sent >= cfg.After {
			got.Add(m.Data)
			recordLatency(hist, time.Duration(now-sent))
		}
	})
	if err != nil {
		return err
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		return err
	}
	before := selfUsage()
	if err := c.send(g28Line{Ready: true}); err != nil {
		return err
	}
	_ = c.await(ctx, "stop")
	_ = sub.Drain()
	for i := 0; sub.IsValid() && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond) // Drain has no wait of its own: at most 10 s
	}
	mu.Lock()
	defer mu.Unlock()
	enc, err := encodeHistogram(hist)
	if err != nil {
		return err
	}
	return c.result(g28SubResult{Got: got, Latency: enc, Usage: selfUsage().Sub(before)})
}
