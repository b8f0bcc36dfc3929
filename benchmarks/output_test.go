package benchmarks

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"
)

func TestTallyDiff(t *testing.T) {
	var a, b Tally
	for i := range 10 {
		body := newBody(32, 1)
		setSeq(body, seqOf(1, int64(i)))
		a.Add(body)
		if i != 3 {
			b.Add(body)
		}
	}
	if d := a.Diff(a); d != "" {
		t.Errorf("equal tallies differ: %s", d)
	}
	if d := a.Diff(b); !strings.Contains(d, "1 of 10 messages missing") {
		t.Errorf("missing: %s", d)
	}
	dup := b
	body := newBody(32, 1)
	setSeq(body, seqOf(1, 5))
	dup.Add(body) // a duplicate makes up the count, not the checksum
	if d := a.Diff(dup); !strings.Contains(d, "checksum differs") {
		t.Errorf("duplicate for a loss: %s", d)
	}
}

func TestRatiosAndOutputs(t *testing.T) {
	ff := Load{Publishers: 4, BodySize: 128, Topics: 16, Messages: 100, Ack: FireAndForget}
	rr := Load{Publishers: 4, BodySize: 128, Topics: 16, Duration: time.Second, Ack: RequestReply, Window: 4096}
	limited := rr
	limited.Rate = 1000
	rs := []Result{
		{Run: Run{ID: "sub", Scenario: "ceiling-subscriber", Load: ff}, Valid: true, MsgsPerSec: 1000},
		{Run: Run{ID: "async-ff", Scenario: "engine-async", Load: ff}, Valid: true, MsgsPerSec: 250},
		{Run: Run{ID: "resp", Scenario: "ceiling-responder", Load: rr}, Valid: true, MsgsPerSec: 400},
		{Run: Run{ID: "sync-rr", Scenario: "engine-sync", Load: rr}, Valid: true, MsgsPerSec: 100,
			Engine: &EngineReport{SyncsPerMsg: 0.01}, Latency: Latency{Count: 1, P50: 1500 * time.Microsecond}},
		{Run: Run{ID: "half", Scenario: "engine-sync", Load: limited, RateOf: "sync-rr", RateFraction: 0.5}, Valid: true, MsgsPerSec: 50},
		{Run: Run{ID: "bad", Scenario: "engine-async", Load: rr}, MsgsPerSec: 900, Problems: []string{"lost"}},
	}
	computeRatios(rs)
	for _, c := range []struct {
		id, ceiling string
		ratio       float64
	}{
		{"sub", "sub", 1}, {"async-ff", "sub", 0.25}, {"resp", "resp", 1}, {"sync-rr", "resp", 0.25},
		{"half", "", 0}, {"bad", "", 0},
	} {
		for _, r := range rs {
			if r.Run.ID == c.id && (r.Ceiling != c.ceiling || r.Ratio != c.ratio) {
				t.Errorf("%s: ceiling %q ratio %g, want %q %g", c.id, r.Ceiling, r.Ratio, c.ceiling, c.ratio)
			}
		}
	}

	var md bytes.Buffer
	if err := WriteMarkdown(&md, Info{Command: "engine bench"}, rs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| sync-rr | engine-sync | rr w4096 128B p4 t16 | 100 |", "| 0.250 |", "| ceiling |", "| 1500 |",
		"half: publishers limited to 1,000 msgs/s, 50% of sync-rr.", "bad is INVALID: lost."} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}

	var buf bytes.Buffer
	if err := WriteCSV(&buf, rs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(rs)+1 || rows[0][0] != "run" || rows[4][0] != "sync-rr" {
		t.Fatalf("csv: %v", rows)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	if got := rows[1][col["ratio"]]; got != "1.000" {
		t.Errorf("csv ratio of a ceiling %q", got)
	}
	if got := rows[4][col["ratio"]]; got != "0.250" {
		t.Errorf("csv ratio %q", got)
	}
	if got := rows[6][col["valid"]]; got != "NO" {
		t.Errorf("csv valid %q", got)
	}
}
