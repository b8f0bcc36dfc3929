package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestSubjectHistoryAcrossTopics: a subject's history can span topics: stored in _overflow while
// the topic limit was reached, in its own topic once the limit was raised, in a declared topic
// once a pattern was declared for it (docs/CONFIG.md, "Wide subject spaces"). `engine get
// --subject S` without --topic reads every topic and prints all of S's messages in the order
// they were stored, offline and online.
func TestSubjectHistoryAcrossTopics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var want []string // bodies on device.7.temp, in publish order
	var topics []string
	publish := func(e *engine, n int) {
		t.Helper()
		nc := connect(t, e.url)
		var last ack
		for range n {
			body := fmt.Sprintf("reading %d", len(want))
			last = stored(t, nc, msg("device.7.temp", body))
			want = append(want, body)
		}
		topics = append(topics, last.Topic)
		stored(t, nc, msg("device.8.temp", "another subject"))
		waitReadable(t, nc, last)
	}
	e := startEngine(t, dir, "--max-topics=1")
	nc := connect(t, e.url)
	stored(t, nc, msg("other.subject", "takes the one topic the rule may make"))
	publish(e, 2) // _overflow
	e.stop()
	e = startEngineOpts(t, dir, procOpts{args: runArgs(dir, "--max-topics=10")})
	publish(e, 2) // device_7_temp
	e.stop()
	e = startEngineOpts(t, dir, procOpts{args: runArgs(dir, "--topics", "device.*.temp")})
	publish(e, 2) // device
	if fmt.Sprint(topics) != "[_overflow device_7_temp device]" {
		t.Fatalf("the subject was stored in %v, want _overflow, its own topic, the declared one", topics)
	}

	for _, src := range [][]string{offline(dir), online(e.url)} {
		got := ndjson(t, mustCLI(t, append([]string{"get", "--subject", "device.7.temp", "--json"}, src...)...))
		var bodies []string
		for _, m := range got {
			bodies = append(bodies, m["body"].(string))
		}
		var wantB64 []string
		for _, b := range want {
			wantB64 = append(wantB64, b64(b))
		}
		if fmt.Sprint(bodies) != fmt.Sprint(wantB64) {
			t.Fatalf("get --subject device.7.temp %v: %d messages %v, want %v", src[0], len(got), bodies, wantB64)
		}
	}
	out := mustCLI(t, "get", "--subject", "device.7.temp", "--count", "3", "--store", dir)
	for _, w := range []string{"reading 0", "reading 2", "3 messages on subject device.7.temp", "_overflow, device_7_temp", "more may follow"} {
		if !strings.Contains(out, w) {
			t.Errorf("get --subject --count 3: %q does not say %q", out, w)
		}
	}
	if r := runCLI(t, "get", "--store", dir); r.code != 2 {
		t.Errorf("get without --topic or --subject: exit %d, want 2", r.code)
	}
}
