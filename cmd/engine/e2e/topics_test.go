package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestTopicsBySubjectPattern: declared topics hold every subject their pattern matches, the rule
// makes at most --max-topics topics and the subjects of any further topic are stored in
// _overflow with their own subject, the limit is logged once and holds across a restart, and the
// store has files for those topics only, however many subjects were published. README, "How a
// NATS message becomes a RocketMQ record"; docs/CONFIG.md, topics and max_topics.
func TestTopicsBySubjectPattern(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--topics", "device.*.temp,orders.>=orders_all", "--max-topics", "2")
	nc := connect(t, e.url)
	want := map[string]string{
		"device.1.temp": "device", "device.2.temp": "device", "orders.eu.paid": "orders_all",
		"x.1": "x_1", "x.2": "x_2", "x.3": "_overflow", "x.4": "_overflow", "device.1.hum": "_overflow",
	}
	order := []string{"device.1.temp", "device.2.temp", "orders.eu.paid", "x.1", "x.2", "x.3", "x.4", "device.1.hum"}
	for _, s := range order {
		if a, raw := request(t, nc, &nats.Msg{Subject: s, Data: []byte(s)}); a.Error != nil || a.Topic != want[s] {
			t.Fatalf("%s: %s, want topic %s", s, raw, want[s])
		}
	}
	// A wide subject space under one declared topic: no file per subject.
	const devices = 500
	for i := range devices {
		if err := nc.Publish(fmt.Sprintf("device.%d.temp", 1000+i), []byte("t")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if a, raw := request(t, nc, &nats.Msg{Subject: "x.1", Data: []byte("again")}); a.Topic != "x_1" {
		t.Fatalf("x.1 again: %s", raw)
	}
	if line, _, ok := e.findLog(0, "ingress: topic limit reached"); !ok || line["subject"] != "x.3" || line["max_topics"] != 2.0 {
		t.Errorf("limit log %v (found %v), want one naming x.3 and the limit", line, ok)
	}
	e.stop()
	if n := countLogs(e, "ingress: topic limit reached"); n != 1 {
		t.Errorf("the limit was logged %d times, want once", n)
	}

	topics := topicNames(t, dir)
	if wantTopics := []string{"_overflow", "device", "orders_all", "x_1", "x_2"}; !slices.Equal(topics, wantTopics) {
		t.Fatalf("topics %v, want %v", topics, wantTopics)
	}
	if dirs, err := os.ReadDir(filepath.Join(dir, "consumequeue")); err != nil || len(dirs) != 5 {
		t.Fatalf("consumequeue holds %d directories (%v), want one per topic", len(dirs), err)
	}
	if n := storedCount(t, dir, "device"); n != 2+devices {
		t.Errorf("topic device holds %d messages, want %d", n, 2+devices)
	}
	var overflow []string
	for _, q := range ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "_overflow", "--json"}, offline(dir)...)...)) {
		for _, m := range readQueue(t, offline(dir), "_overflow", int32(q["queueId"].(float64))) {
			props, _ := m["properties"].(map[string]any)
			overflow = append(overflow, fmt.Sprint(props["NATS_SUBJECT"]))
		}
	}
	slices.Sort(overflow)
	if !slices.Equal(overflow, []string{"device.1.hum", "x.3", "x.4"}) {
		t.Errorf("_overflow holds subjects %v, want device.1.hum, x.3, x.4", overflow)
	}

	// After a restart the store's topics count: x.5 is past the limit, x.2 keeps its topic.
	e = e.restart(t)
	nc = connect(t, e.url)
	for s, topic := range map[string]string{"x.5": "_overflow", "x.2": "x_2", "device.9.temp": "device"} {
		if a, raw := request(t, nc, &nats.Msg{Subject: s, Data: []byte(s)}); a.Topic != topic {
			t.Errorf("after the restart, %s: %s, want topic %s", s, raw, topic)
		}
	}
	e.stop()
	if got := topicNames(t, dir); len(got) != 5 {
		t.Errorf("topics after the restart %v, want the same five", got)
	}
}

// TestTopicPatternErrors: a pattern that cannot declare a topic stops the start with a message
// naming it and the fix.
func TestTopicPatternErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ arg, says string }{
		{"*.temp", "name its topic"},
		{"orders.>,orders.eu", "overlap"},
		{"a..b", "not a valid NATS subject pattern"},
		{"a.>=bad/topic", "a.>=bad/topic"},
	} {
		r := runCLI(t, append([]string{"run", "--topics", tc.arg}, offline(t.TempDir())...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("--topics %q: exit %d, stderr %q; want 2 and %q", tc.arg, r.code, r.stderr, tc.says)
		}
	}
}

// topicNames lists the store's topics, offline.
func topicNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, o := range ndjson(t, mustCLI(t, append([]string{"topics", "--json"}, offline(dir)...)...)) {
		names = append(names, fmt.Sprint(o["topic"]))
	}
	slices.Sort(names)
	return names
}

// countLogs counts p's log lines that start with prefix.
func countLogs(p *engine, prefix string) int {
	n := 0
	for from := 0; ; n++ {
		_, i, ok := p.findLog(from, prefix)
		if !ok {
			return n
		}
		from = i + 1
	}
}
