package e2e

import (
	"testing"
)

// TestHarness checks the harness itself on the simplest path a user takes: the engine starts
// on a fresh store, acks a request, stops on SIGTERM, starts again cleanly, and `engine get`
// reads the message back offline.
func TestHarness(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	if e.recovered["clean_exit"] != true {
		t.Fatalf("a fresh store: %v, want clean_exit true", e.recovered)
	}
	a := stored(t, connect(t, e.url), msg("harness.one", "hello"))
	e.stop()
	e = e.restart(t)
	if e.recovered["clean_exit"] != true {
		t.Fatalf("after SIGTERM: %v, want clean_exit true", e.recovered)
	}
	e.stop()
	got := ndjson(t, mustCLI(t, append([]string{"get", "--topic", a.Topic, "--queue", itoa(a.QueueID), "--json"}, offline(dir)...)...))
	if len(got) != 1 || got[0]["msgId"] != a.MsgID {
		t.Fatalf("get: %v, want the message acked as %+v", got, a)
	}
}
