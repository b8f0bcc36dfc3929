package benchmarks

import (
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, from 1 µs to 10 minutes, with three significant
// digits (an error of at most 0.1 %). HdrHistogram (rather than a hand-made log-linear one)
// gives that precision at every quantile with a fixed, small footprint, merges the histograms of
// several publishers exactly, and has a compact, standard wire encoding, which the publisher
// process uses to hand its histogram to the parent and which other HdrHistogram tools read.
const (
	latencyLowest  = 1
	latencyHighest = int64(10 * time.Minute / time.Microsecond)
	latencyDigits  = 3
)

func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyLowest, latencyHighest, latencyDigits)
}

// recordLatency records d in h, clamped to the histogram's range.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(int64(d/time.Microsecond), latencyLowest)
	_ = h.RecordValue(min(us, latencyHighest))
}

// encodeHistogram is the base64 V2 compressed encoding of h ("" for an empty one).
func encodeHistogram(h *hdrhistogram.Histogram) (string, error) {
	if h == nil || h.TotalCount() == 0 {
		return "", nil
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	return string(b), err
}

// Latency summarizes a histogram of ack latencies.
type Latency struct {
	Count               int64
	P50, P99, P999, Max time.Duration
	Mean                time.Duration
	// Encoded is the histogram itself (see encodeHistogram), kept for later analysis.
	Encoded string
}

// summarize decodes an encoded histogram and reads its quantiles.
func summarize(encoded string) (Latency, error) {
	if encoded == "" {
		return Latency{}, nil
	}
	h, err := hdrhistogram.Decode([]byte(encoded))
	if err != nil {
		return Latency{}, fmt.Errorf("latency histogram: %w", err)
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Latency{
		Count:   h.TotalCount(),
		P50:     us(h.ValueAtQuantile(50)),
		P99:     us(h.ValueAtQuantile(99)),
		P999:    us(h.ValueAtQuantile(99.9)),
		Max:     us(h.Max()),
		Mean:    time.Duration(h.Mean() * float64(time.Microsecond)),
		Encoded: encoded,
	}, nil
}
