package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestConsumeUntilEndDrains: engine consume --until-end, as a script drains a topic: it writes
// every message stored (raw bodies, one a line) and exits 0 at the end, its group committed
// there, so that a second run of the same group writes nothing and exits 0 too.
func TestConsumeUntilEndDrains(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	var acks []ack
	var want []string
	for i := range 300 {
		body := fmt.Sprintf("drain-%03d", i)
		acks = append(acks, stored(t, nc, msg("drain.orders", body)))
		want = append(want, body)
	}
	waitReadable(t, nc, acks...)
	topic := acks[0].Topic

	r := runCLI(t, "consume", "--group", "drain", "--topic", topic, "--until-end", "--format", "raw", "--nats", e.url)
	got := strings.Fields(r.stdout)
	slices.Sort(got)
	if r.code != 0 || !slices.Equal(got, want) {
		t.Fatalf("consume: exit %d, %d lines (want 0 and the %d bodies); stderr %q", r.code, len(got), len(want), r.stderr)
	}
	if r := runCLI(t, "consume", "--group", "drain", "--topic", topic, "--until-end", "--format", "raw", "--nats", e.url); r.code != 0 || r.stdout != "" {
		t.Fatalf("again: exit %d, stdout %q, stderr %q; want 0 and nothing: the group committed at the end", r.code, r.stdout, r.stderr)
	}
}
