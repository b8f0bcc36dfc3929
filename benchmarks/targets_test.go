package benchmarks

import (
	"context"
	"strings"
	"testing"
	"time"
)

// newTargets are the targets this file tests beyond run_test.go's, in the modes they run in.
var newTargets = []struct {
	scenario string
	ack      AckMode
}{
	{"kafka-style", FireAndForget},
	{"kafka-style", RequestReply},
	{"kafka-style-sync", FireAndForget},
	{"kafka-style-sync", RequestReply},
	{"jetstream-default", FireAndForget},
	{"jetstream-default", RequestReply},
	{"jetstream-syncalways", FireAndForget},
	{"jetstream-syncalways", RequestReply},
}

// TestNewTargetsTinyRuns runs each new target once: valid, everything found, ratios to the
// ceiling and to JetStream of the same load.
func TestNewTargetsTinyRuns(t *testing.T) {
	var runs []Run
	for _, ack := range []AckMode{FireAndForget, RequestReply} {
		sc := "ceiling-subscriber"
		if ack == RequestReply {
			sc = "ceiling-responder"
		}
		runs = append(runs, tinyRun(sc, ack))
	}
	for _, tc := range newTargets {
		runs = append(runs, tinyRun(tc.scenario, tc.ack))
	}
	results, err := testRunner(t).Run(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if !r.Valid {
			t.Errorf("%s: invalid: %v", r.Run.ID, r.Problems)
			continue
		}
		if r.Sent != 301 || r.Found != 301 {
			t.Errorf("%s: sent %d, found %d, want 301", r.Run.ID, r.Sent, r.Found)
		}
		if r.Ceiling == "" || r.JetStream == "" || r.JetStreamSync == "" {
			t.Errorf("%s: ratios missing: ceiling %q, JetStream %q, JetStream sync %q", r.Run.ID, r.Ceiling, r.JetStream, r.JetStreamSync)
		}
		if strings.HasPrefix(r.Run.Scenario, "kafka-style-sync") && (r.Syncs == 0 || r.SyncsPerMsg() <= 0) {
			t.Errorf("%s: no syncs counted", r.Run.ID)
		}
		if r.Run.Load.Ack == RequestReply && r.Acked != 301 {
			t.Errorf("%s: acked %d", r.Run.ID, r.Acked)
		}
	}
}

// TestNewTargetsCatchLoss makes every new target lose a message, in transit (the publisher
// claims one it never sent) and in the target (kafka-style does not write it, JetStream deletes
// it before it stops): verification must name the loss.
func TestNewTargetsCatchLoss(t *testing.T) {
	var runs []Run
	for _, tc := range newTargets {
		r := tinyRun(tc.scenario, tc.ack)
		r.ID += "/publisher-skip"
		r.Fault.PublisherSkip = 17
		r.Stall = 300 * time.Millisecond
		runs = append(runs, r)
		r = tinyRun(tc.scenario, tc.ack)
		r.ID += "/target-drop"
		r.Fault.TargetDrop = 42
		runs = append(runs, r)
	}
	results, err := testRunner(t).Run(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Valid {
			t.Errorf("%s: a lost message went unnoticed: %+v", r.Run.ID, r)
			continue
		}
		if all := strings.Join(r.Problems, "; "); !strings.Contains(all, "1 of 301 messages missing") {
			t.Errorf("%s: problems do not name the loss: %s", r.Run.ID, all)
		}
	}
}

// TestDiskCeiling runs the disk ceiling for a few batches, and once with a batch lost.
func TestDiskCeiling(t *testing.T) {
	l := diskLoad(0)
	l.BodySize, l.Messages = 64<<10, 20
	ok := Run{ID: "disk", Scenario: "disk-ceiling", Load: l, Timeout: time.Minute}
	lost := ok
	lost.ID, lost.Fault.TargetDrop = "disk/lost", 7
	results, err := testRunner(t).Run(context.Background(), []Run{ok, lost})
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; !r.Valid || r.Sent != 20 || r.Found != 20 || r.MBPerSec <= 0 || r.SyncsPerMsg() != 1 {
		t.Errorf("disk ceiling: %+v", r)
	}
	if r := results[1]; r.Valid || !strings.Contains(strings.Join(r.Problems, ";"), "1 of 20 messages missing") {
		t.Errorf("disk ceiling with a lost batch: valid %v, %v", r.Valid, r.Problems)
	}
}
