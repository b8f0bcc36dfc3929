package console

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The sampler: every Interval it reads the engine's counters and keeps them in a ring of History
// samples, so that a chart opened now shows the last minutes at once (and every page opened
// shows the same). The ring is the only state, bounded: History samples of a few counters.

// sample is the counters at one moment (cumulative, as the engine keeps them).
type sample struct {
	at                                         time.Time
	records, bytes, received, dropped, refused int64
	reads                                      int64
	syncs                                      uint64
	syncSeconds                                float64
	diskUsed                                   float64 // -1: unknown
	dispatchLag                                int64
}

// ring holds the last samples, oldest first.
type ring struct {
	mu   sync.Mutex
	buf  []sample
	next int // where the next sample goes
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]sample, n)} }

func (r *ring) add(s sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// all returns the samples, oldest first.
func (r *ring) all() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]sample(nil), r.buf[:r.next]...)
	}
	return append(append([]sample(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// Run samples the attached engine every Interval until ctx ends (a stage: cmd/engine runs it
// while the monitor serves). Before Attach there is nothing to sample.
func (c *Console) Run(ctx context.Context) error {
	ticks := c.ticks
	if ticks == nil {
		tick := time.NewTicker(c.opts.Interval)
		defer tick.Stop()
		ticks = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-ticks:
			c.sampleNow(now)
		}
	}
}

// sampleNow takes one sample of the attached engine, if any.
func (c *Console) sampleNow(now time.Time) {
	t := c.attached()
	if t == nil || t.Stats == nil {
		return
	}
	st := t.Stats()
	s := sample{at: now, records: st.Records, bytes: st.Bytes, diskUsed: st.DiskUsedRatio, dispatchLag: st.DispatchLag}
	if in := st.Ingress; in != nil {
		s.received, s.dropped = in.Received, in.Dropped
		for _, n := range in.Rejected {
			s.refused += n
		}
		for _, n := range in.Failed {
			s.refused += n
		}
	}
	if t.ReadRequests != nil {
		s.reads = t.ReadRequests()
	}
	if t.Syncs != nil {
		s.syncs, s.syncSeconds = t.Syncs.Totals()
	}
	c.samples.add(s)
}

// Point is one interval of the charts: rates per second over the interval that ends at T.
type Point struct {
	T        int64   `json:"t"` // ms
	Messages float64 `json:"messages"`
	Bytes    float64 `json:"bytes"`
	Received float64 `json:"received"`
	Reads    float64 `json:"reads"`
	Dropped  float64 `json:"dropped"`
	Refused  float64 `json:"refused"`
	// SyncMs is the mean CommitLog sync time over the interval (0 with no sync).
	SyncMs      float64 `json:"sync_ms"`
	DiskUsed    float64 `json:"disk_used"`
	DispatchLag int64   `json:"dispatch_lag"`
}

// points turns the samples after since (ms) into rates; the first sample only starts the first
// interval.
func points(ss []sample, since int64) []Point {
	out := []Point{}
	for i := 1; i < len(ss); i++ {
		a, b := ss[i-1], ss[i]
		if b.at.UnixMilli() <= since {
			continue
		}
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		rate := func(x, y int64) float64 { return float64(max(y-x, 0)) / dt }
		p := Point{T: b.at.UnixMilli(), Messages: rate(a.records, b.records), Bytes: rate(a.bytes, b.bytes),
			Received: rate(a.received, b.received), Reads: rate(a.reads, b.reads), Dropped: rate(a.dropped, b.dropped),
			Refused: rate(a.refused, b.refused), DiskUsed: b.diskUsed, DispatchLag: b.dispatchLag}
		if n := b.syncs - a.syncs; b.syncs > a.syncs {
			p.SyncMs = (b.syncSeconds - a.syncSeconds) / float64(n) * 1000
		}
		out = append(out, p)
	}
	return out
}

// samplesAPI is GET /console/api/samples?since=MS: the points after since (all kept without it).
func (c *Console) samplesAPI(w http.ResponseWriter, r *http.Request) {
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail(w, http.StatusBadRequest, "since: want a time in ms: "+err.Error())
			return
		}
		since = n
	}
	reply(w, map[string]any{"interval_ms": c.opts.Interval.Milliseconds(), "history": c.opts.History,
		"points": points(c.samples.all(), since)})
}
