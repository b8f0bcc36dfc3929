package benchmarks

import (
	"fmt"
	"strings"
	"time"
)

// progressBar is the state behind the progress line on a terminal: how many runs are done, and
// the time left, from the runs' estimates scaled by how long the finished runs took against
// theirs (this machine, this load on it).
type progressBar struct {
	estimate func(Run) time.Duration
	runs     []Run
	begun    time.Time
	current  int
	started  time.Time
	// estDone and tookDone add up the estimates and the wall times of the finished runs.
	estDone, tookDone time.Duration
}

// start notes that run i begins.
func (b *progressBar) start(i int) { b.current, b.started = i, time.Now() }

// finish notes that run i took took.
func (b *progressBar) finish(i int, took time.Duration) {
	if b.estimate != nil {
		b.estDone += b.estimate(b.runs[i])
		b.tookDone += took
	}
	b.current = i + 1
}

// left is the expected time to the end of the invocation, or -1 when there is no estimate.
func (b *progressBar) left() time.Duration {
	if b.estimate == nil || len(b.runs) == 0 {
		return -1
	}
	scale := 1.0
	if b.estDone > 0 {
		scale = min(max(float64(b.tookDone)/float64(b.estDone), 0.25), 4)
	}
	var rest time.Duration
	for i := b.current; i < len(b.runs); i++ {
		rest += b.estimate(b.runs[i])
	}
	if b.current < len(b.runs) && !b.started.IsZero() {
		rest -= min(time.Since(b.started), b.estimate(b.runs[b.current]))
	}
	return time.Duration(float64(rest) * scale)
}

// render draws the bar: "[#######.........] 12/40 7m30s, ~3m10s left".
func (b *progressBar) render() string {
	const width = 20
	n := len(b.runs)
	if n == 0 {
		return ""
	}
	filled := b.current * width / n
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	s := fmt.Sprintf("[%s] %d/%d %s", bar, b.current, n, time.Since(b.begun).Round(time.Second))
	if left := b.left(); left >= 0 {
		s += fmt.Sprintf(", ~%s left", left.Round(time.Second))
	}
	return s + " |"
}
