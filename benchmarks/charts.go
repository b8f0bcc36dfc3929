package benchmarks

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Charts. Every chart is written twice, as SVG (for the Markdown report) and as PNG. They are
// drawn with gonum.org/v1/plot: log axes, legends and text layout, SVG and PNG from one
// drawing, no cgo.
//
//   - throughput-vs-<dim>-<ack>: messages per second (MB/s for the body size) against the
//     topic count, body size, publishers or window, log x and y, one line per target. A sweep
//     is a family of valid runs whose loads differ in that dimension only; of the families of a
//     dimension and ack mode, the one with the most points is drawn.
//   - latency-cdf-<ack><window>: the ack latency CDF of every target of the request/reply load
//     with the most targets (the base load in the presets), from each run's merged HdrHistogram,
//     log x, with the batched-ack runs of the same window, publishers, bodies and topics.

// chartWidth and chartHeight are the charts' size.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 5 * vg.Inch
)

// dimension is a load dimension a sweep varies.
type dimension struct {
	name, label string
	get         func(Load) int
	set         func(*Load, int)
	// bytes plots MB/s instead of messages per second.
	bytes bool
}

var dimensions = []dimension{
	{"topics", "topics", func(l Load) int { return l.Topics }, func(l *Load, v int) { l.Topics = v }, false},
	{"body", "body size (bytes)", func(l Load) int { return l.BodySize }, func(l *Load, v int) { l.BodySize = v }, true},
	{"publishers", "publishers", func(l Load) int { return l.Publishers }, func(l *Load, v int) { l.Publishers = v }, false},
	{"window", "messages in flight per publisher", func(l Load) int { return l.Window }, func(l *Load, v int) { l.Window = v }, false},
}

// WriteCharts draws the charts of rs into dir and returns their SVG file names (relative to
// dir). Results without enough points for a chart give none; no chart at all is not an error.
func WriteCharts(dir string, rs []Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var charts []*chart
	for _, d := range dimensions {
		for _, ack := range []AckMode{FireAndForget, RequestReply, Batched} {
			c, err := sweepChart(rs, d, ack)
			if err != nil {
				return nil, err
			}
			charts = append(charts, c)
		}
	}
	c, err := latencyCDF(rs)
	if err != nil {
		return nil, err
	}
	charts = append(charts, c)
	var names []string
	for _, c := range charts {
		if c == nil {
			continue
		}
		for _, ext := range []string{"svg", "png"} {
			if err := c.save(filepath.Join(dir, c.name+"."+ext), ext); err != nil {
				return names, err
			}
		}
		names = append(names, c.name+".svg")
	}
	return names, nil
}

// chart is a plot with its legend, drawn beside it rather than over the lines.
type chart struct {
	name   string
	plot   *plot.Plot
	legend plot.Legend
	labels []string
}

func newChart(name string) *chart {
	c := &chart{name: name, plot: plot.New(), legend: plot.NewLegend()}
	c.legend.Top, c.legend.Left = true, true
	c.plot.Add(plotter.NewGrid())
	return c
}

// add adds a line (and its points, when not nil) as the i-th series, with the i-th style.
func (c *chart) add(i int, label string, pts plotter.XYs, withPoints bool) error {
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color = plotutil.Color(i)
	line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
	line.Width = vg.Points(1.5)
	if !withPoints {
		c.plot.Add(line)
		c.legend.Add(label, line)
	} else {
		points.Shape = plotutil.Shape(i)
		points.Color = line.Color
		c.plot.Add(line, points)
		c.legend.Add(label, line, points)
	}
	c.labels = append(c.labels, label)
	return nil
}

// save draws the chart in format ext ("svg", "png") into path: the plot on the left, the
// legend in a column on the right as wide as its longest label.
func (c *chart) save(path, ext string) error {
	cv, err := draw.NewFormattedCanvas(chartWidth, chartHeight, ext)
	if err != nil {
		return err
	}
	dc := draw.New(cv)
	var lw vg.Length
	for _, l := range c.labels {
		lw = max(lw, c.legend.TextStyle.Width(l))
	}
	lw += c.legend.ThumbnailWidth + vg.Points(16)
	c.plot.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	c.legend.Draw(draw.Crop(dc, chartWidth-lw+vg.Points(8), 0, 0, -vg.Points(24)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = cv.WriteTo(f)
	return errors.Join(err, f.Close())
}

// chartable says whether r can be a point of a chart: valid, measured, not rate-limited.
func chartable(r *Result) bool {
	return r.Valid && r.MsgsPerSec > 0 && r.Run.Load.Rate == 0 && !scenarios[r.Run.Scenario].SelfLoaded
}

// sweepFamily is a set of runs whose loads differ in one dimension only.
type sweepFamily struct {
	key    string // the load's Key with the dimension zeroed
	values map[int]bool
	runs   []*Result
}

// sweepChart draws the largest family of runs of ack mode ack that sweeps d (at least two
// values of d), or returns nil.
func sweepChart(rs []Result, d dimension, ack AckMode) (*chart, error) {
	fams := map[string]*sweepFamily{}
	var order []string
	for i := range rs {
		r := &rs[i]
		if !chartable(r) || r.Run.Load.Ack != ack {
			continue
		}
		l := r.Run.Load
		d.set(&l, 0)
		if d.name == "window" && ack != RequestReply {
			continue
		}
		k := l.Key()
		f := fams[k]
		if f == nil {
			f = &sweepFamily{key: k, values: map[int]bool{}}
			fams[k] = f
			order = append(order, k)
		}
		f.values[d.get(r.Run.Load)] = true
		f.runs = append(f.runs, r)
	}
	var best *sweepFamily
	for _, k := range order {
		if f := fams[k]; len(f.values) >= 2 && (best == nil || len(f.values) > len(best.values)) {
			best = f
		}
	}
	if best == nil {
		return nil, nil
	}
	ackName := string(ack)
	if ack.windowed() && d.name != "window" {
		ackName += strconv.Itoa(best.runs[0].Run.Load.Window)
	}
	c := newChart(fmt.Sprintf("throughput-vs-%s-%s", d.name, ackName))
	p := c.plot
	l := best.runs[0].Run.Load
	d.set(&l, 0)
	p.Title.Text = fmt.Sprintf("Throughput against %s (%s)", d.label, familyText(l, d))
	p.X.Label.Text = d.label
	p.Y.Label.Text = "messages/s"
	if d.bytes {
		p.Y.Label.Text = "MB/s (bodies)"
	}
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = valueTicks(best.values)
	p.Y.Tick.Marker = siLogTicks{}
	series := map[string]map[int]float64{}
	var targets []string
	for _, r := range best.runs {
		s := series[r.Run.Scenario]
		if s == nil {
			s = map[int]float64{}
			series[r.Run.Scenario] = s
			targets = append(targets, r.Run.Scenario)
		}
		v := r.MsgsPerSec
		if d.bytes {
			v = r.MBPerSec
		}
		s[d.get(r.Run.Load)] = v // the last run of a point wins
	}
	for i, sc := range targets {
		xs := make([]int, 0, len(series[sc]))
		for x := range series[sc] {
			xs = append(xs, x)
		}
		slices.Sort(xs)
		pts := make(plotter.XYs, 0, len(xs))
		for _, x := range xs {
			pts = append(pts, plotter.XY{X: float64(x), Y: series[sc][x]})
		}
		if err := c.add(i, sc, pts, true); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// familyText describes what a family's runs have in common (d, zeroed, left out).
func familyText(l Load, d dimension) string {
	s := string(l.Ack)
	if l.Ack.windowed() && d.name != "window" {
		s += fmt.Sprintf(" %d in flight", l.Window)
	}
	if d.name != "body" {
		s += ", " + sizeText(l.BodySize)
	}
	if d.name != "publishers" {
		s += fmt.Sprintf(", %d publishers", l.Publishers)
	}
	if d.name != "topics" {
		s += fmt.Sprintf(", %d topics", l.Topics)
	}
	return s
}

// latencyCDF draws the ack latency CDFs of the request/reply load with the most targets, or
// returns nil when no run has latencies.
func latencyCDF(rs []Result) (*chart, error) {
	byKey := map[string][]*Result{}
	var order []string
	for i := range rs {
		r := &rs[i]
		if !chartable(r) || r.Run.Load.Ack != RequestReply || r.Latency.Encoded == "" {
			continue
		}
		k := r.Run.Load.Key()
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	if len(order) == 0 {
		return nil, nil
	}
	best := slices.MaxFunc(order, func(a, b string) int { return cmp.Compare(len(byKey[a]), len(byKey[b])) })
	// MaxFunc returns the first maximum, so ties go to the load that ran first (the base load).
	runs := byKey[best]
	l := runs[0].Run.Load
	c := newChart(fmt.Sprintf("latency-cdf-rr%d", l.Window))
	p := c.plot
	p.Title.Text = fmt.Sprintf("Ack latency CDF (%s)", loadText(l))
	p.X.Label.Text = "ack latency (µs), publish to reply"
	p.Y.Label.Text = "fraction of acks"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = siLogTicks{}
	p.Y.Min, p.Y.Max = 0, 1
	for i := range rs {
		r := &rs[i]
		if chartable(r) && r.Run.Load.Ack == Batched && r.Latency.Encoded != "" && referenceLoad(r.Run.Load, false).Key() == best {
			runs = append(runs, r)
		}
	}
	for i, r := range runs {
		pts, err := cdfPoints(r.Latency.Encoded)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Run.ID, err)
		}
		label := r.Run.Scenario
		if r.Run.Load.Ack == Batched {
			label += " (batched acks)"
		}
		if err := c.add(i, label, pts, false); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// cdfPoints is the cumulative distribution of an encoded latency histogram: for every bucket
// with counts, its upper value (µs) and the fraction of values at or below it.
func cdfPoints(encoded string) (plotter.XYs, error) {
	h, err := hdrhistogram.Decode([]byte(encoded))
	if err != nil {
		return nil, err
	}
	total := float64(h.TotalCount())
	if total == 0 {
		return nil, errors.New("empty histogram")
	}
	var pts plotter.XYs
	var cum int64
	for _, b := range h.Distribution() {
		if b.Count == 0 {
			continue
		}
		cum += b.Count
		pts = append(pts, plotter.XY{X: float64(max(b.To, 1)), Y: float64(cum) / total})
	}
	return pts, nil
}

// valueTicks marks exactly the swept values.
func valueTicks(values map[int]bool) plot.ConstantTicks {
	vs := make([]int, 0, len(values))
	for v := range values {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	ticks := make(plot.ConstantTicks, 0, len(vs))
	for _, v := range vs {
		ticks = append(ticks, plot.Tick{Value: float64(v), Label: siText(float64(v))})
	}
	return ticks
}

// siLogTicks marks the powers of ten (labelled 1, 10, 100, 1k, ... 1M) and, between them,
// 2 to 9 times each: a log axis readable at a glance. When the range holds fewer than two
// powers of ten, the 2 and 5 multiples are labelled too, and failing that every tick.
type siLogTicks struct{}

// Ticks implements plot.Ticker.
func (siLogTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= 0 || hi < lo {
		return nil
	}
	var ticks []plot.Tick
	var mults []float64
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		p := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			if v := m * p; v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				ticks = append(ticks, plot.Tick{Value: v})
				mults = append(mults, m)
			}
		}
	}
	for _, labelled := range [][]float64{{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		n := 0
		for i := range ticks {
			if slices.Contains(labelled, mults[i]) {
				ticks[i].Label = siText(ticks[i].Value)
				n++
			}
		}
		if n >= 2 {
			break
		}
	}
	return ticks
}

// siText writes round values with a k, M or G suffix (1k, 10k, 1M); others (1024, 16384) in
// full.
func siText(v float64) string {
	switch {
	case v >= 1e9 && math.Mod(v, 1e9) == 0:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case v >= 1e6 && math.Mod(v, 1e6) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3 && math.Mod(v, 1e3) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
