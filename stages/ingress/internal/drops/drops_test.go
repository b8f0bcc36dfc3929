package drops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// TestTopicsBounded: drops are counted by topic up to MaxTopics topics, the rest together under
// OtherTopics, a message without a topic under InvalidTopic; the total counts them all.
func TestTopicsBounded(t *testing.T) {
	var d Topics
	d.Add("")
	for i := range MaxTopics + 10 {
		d.Add(fmt.Sprintf("t%d", i))
	}
	d.Add("t0")
	total, by := d.Snapshot()
	if total != MaxTopics+12 || len(by) != MaxTopics+1 || by["t0"] != 2 || by[OtherTopics] != 11 || by[InvalidTopic] != 1 {
		t.Fatalf("total %d, %d topics, t0 %d, other %d", total, len(by), by["t0"], by[OtherTopics])
	}
}

// TestReportSaysWhatAndHowFast: a report logs the drops since the last line (ingress's and the
// NATS client's), the topics that lost most, and nothing when nothing new was dropped.
func TestReportSaysWhatAndHowFast(t *testing.T) {
	var logs bytes.Buffer
	topics := &Topics{}
	natsDropped := int64(5)
	r := Reporter{Log: zerolog.New(&logs), Topics: topics, Counts: func() (int64, int64, int64) { return natsDropped, 7, 1 }}
	for range 3 {
		topics.Add("a")
	}
	topics.Add("b")
	r.Event()
	if !r.Report() {
		t.Fatal("nothing reported")
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["dropped"] != 9.0 || line["dropped_by_ingress"] != 4.0 || line["dropped_by_nats_client"] != 5.0 ||
		fmt.Sprint(line["topics_dropping_most"]) != "[a b]" || line["dropped_per_second"] == nil {
		t.Fatalf("report %v", line)
	}
	logs.Reset()
	if r.Report() || logs.Len() != 0 {
		t.Fatalf("a report with nothing new: %s", logs.String())
	}
	natsDropped++
	if !r.Report() {
		t.Fatal("a new drop was not reported")
	}
	r.Stop()
}

// TestFirstDropsReportedAtOnce: the first event arms the report for now, not an interval later;
// the next one waits for the interval.
func TestFirstDropsReportedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		topics := &Topics{}
		r := Reporter{Interval: time.Minute, Log: zerolog.New(&logs), Topics: topics, Counts: func() (int64, int64, int64) { return 0, 0, 0 }}
		defer r.Stop()
		topics.Add("a")
		start := time.Now()
		r.Event()
		<-r.C
		r.Fire()
		if waited := time.Since(start); waited != 0 || logs.Len() == 0 {
			t.Fatalf("first report after %v: %q", waited, logs.String())
		}
		topics.Add("a")
		r.Event() // Fire armed the next look an interval later already
		<-r.C
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("second report after %v, want the interval", waited)
		}
	})
}
