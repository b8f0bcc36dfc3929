package benchmarks

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// chartResults is a small result set: a topic sweep and a body sweep of two targets in both
// ack modes, and request/reply latencies.
func chartResults(t *testing.T) []Result {
	t.Helper()
	var rs []Result
	add := func(sc string, l Load, rate float64) {
		r := Result{Run: Run{ID: sc + "/" + l.Key(), Scenario: sc, Load: l}, Valid: true,
			MsgsPerSec: rate, MBPerSec: rate * float64(l.BodySize) / 1e6}
		if l.Ack == RequestReply {
			h := newLatencyHistogram()
			for i := range 1000 {
				recordLatency(h, time.Duration(100+i*int(rate/1000))*time.Microsecond)
			}
			enc, err := encodeHistogram(h)
			if err != nil {
				t.Fatal(err)
			}
			r.Latency.Encoded = enc
		}
		rs = append(rs, r)
	}
	for _, ack := range []AckMode{FireAndForget, RequestReply} {
		base := withAck(Load{Publishers: 4, Topics: 16, BodySize: 128}, ack)
		for i, sc := range []string{"engine-async", "kafka-style-sync", "jetstream-default"} {
			for _, topics := range SweepTopics {
				l := base
				l.Topics = topics
				add(sc, l, 1e5*float64(i+1)/float64(1+topics/1000))
			}
			for _, body := range SweepBodies {
				l := base
				l.BodySize = body
				add(sc, l, 2e5*float64(i+1)*128/float64(body))
			}
		}
	}
	rs = append(rs, Result{Run: Run{ID: "invalid", Scenario: "engine-sync", Load: withAck(Load{Publishers: 4, Topics: 16, BodySize: 128}, FireAndForget)}})
	return rs
}

// TestWriteCharts checks that the chart writer makes well-formed SVG and PNG files, one pair
// per sweep and one latency CDF.
func TestWriteCharts(t *testing.T) {
	dir := t.TempDir()
	if d := os.Getenv("KEEP_CHARTS"); d != "" {
		dir = d // to look at them
	}
	names, err := WriteCharts(dir, chartResults(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"throughput-vs-topics-ff.svg", "throughput-vs-topics-rr4096.svg",
		"throughput-vs-body-ff.svg", "throughput-vs-body-rr4096.svg",
		"latency-cdf-rr4096.svg",
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("charts %v lack %s", names, w)
		}
	}
	if len(names) != len(want) {
		t.Errorf("charts %v, want %v", names, want)
	}
	for _, n := range names {
		svg, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		root := ""
		for {
			tok, err := dec.Token()
			if err != nil {
				if root == "" {
					t.Errorf("%s: not XML: %v", n, err)
				}
				break
			}
			if se, ok := tok.(xml.StartElement); ok && root == "" {
				root = se.Name.Local
			}
		}
		if root != "svg" || !bytes.Contains(svg, []byte("engine-async")) {
			t.Errorf("%s: root %q, legend missing", n, root)
		}
		f, err := os.Open(filepath.Join(dir, n[:len(n)-len(".svg")]+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", n, err)
		} else if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 250 {
			t.Errorf("%s: %v", n, b)
		}
	}
}

// TestWriteChartsEmpty: without sweeps or latencies there is no chart, and no error.
func TestWriteChartsEmpty(t *testing.T) {
	names, err := WriteCharts(t.TempDir(), []Result{{Run: Run{ID: "x", Scenario: "engine-async",
		Load: Load{Publishers: 1, Topics: 1, BodySize: 128, Ack: FireAndForget}}, Valid: true, MsgsPerSec: 1}})
	if err != nil || len(names) != 0 {
		t.Errorf("charts %v, %v", names, err)
	}
}

func TestSiLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (siLogTicks{}).Ticks(800, 2e6) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"1k", "10k", "100k", "1M"}; !slices.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	labels = nil
	for _, tk := range (siLogTicks{}).Ticks(150e3, 900e3) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"200k", "500k"}; !slices.Equal(labels, want) {
		t.Errorf("labels within a decade %v, want %v", labels, want)
	}
}
