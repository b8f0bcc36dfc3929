package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestRefusedMessagesTakeNoTopicSlot: a new subject takes one of the --max-topics slots when a
// message of it is stored, not when it is first seen. Messages refused on new subjects (400 for a
// header the store reserves, 413 for a body past --max-body), however many subjects they come
// on, leave the slots free: a valid subject after them gets a topic of its own, and so does one
// after a restart, while the limit still sends the subject past it to _overflow. README, "How a
// NATS message becomes a RocketMQ record"; docs/CONFIG.md, max_topics.
func TestRefusedMessagesTakeNoTopicSlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--max-topics", "2", "--max-body", "1KiB", "--http", "127.0.0.1:0")
	nc := connect(t, e.url)
	refuse := func(round string, n int) {
		t.Helper()
		for i := range n {
			m := &nats.Msg{Subject: fmt.Sprintf("bad.%s.%d", round, i), Header: nats.Header{}, Data: []byte("x")}
			want := 400
			if i%2 == 0 {
				m.Header.Set("NATS_SUBJECT", "mine") // the store sets it: invalid
			} else {
				m.Data, want = []byte(strings.Repeat("x", 2048)), 413
			}
			if a, raw := request(t, nc, m); a.Error == nil || a.Error.Code != want {
				t.Fatalf("%s: %s, want a %d", m.Subject, raw, want)
			}
		}
	}
	refuse("first", 40)
	if a := stored(t, nc, &nats.Msg{Subject: "good.a", Data: []byte("a")}); a.Topic != "good_a" {
		t.Fatalf("good.a after 40 refused subjects: topic %s, want good_a (its own)", a.Topic)
	}
	code, body := httpGet(t, e.http+"/status")
	var status struct {
		Ingress struct {
			RuleTopics     int `json:"rule_topics"`
			OverflowRoutes int `json:"overflow_routes"`
		} `json:"ingress"`
	}
	if err := json.Unmarshal([]byte(body), &status); code != 200 || err != nil ||
		status.Ingress.RuleTopics != 1 || status.Ingress.OverflowRoutes != 0 {
		t.Fatalf("/status (%d, %v): ingress %+v, want 1 rule topic and no overflow", code, err, status.Ingress)
	}
	e.stop()

	// After a restart the store's topics count (good_a), the refused subjects never did.
	e = e.restart(t)
	nc = connect(t, e.url)
	refuse("second", 40)
	for _, c := range []struct{ subject, topic string }{
		{"good.b", "good_b"}, {"good.c", "_overflow"}, {"good.a", "good_a"}, {"good.b", "good_b"},
	} {
		if a := stored(t, nc, &nats.Msg{Subject: c.subject, Data: []byte(c.subject)}); a.Topic != c.topic {
			t.Errorf("after the restart, %s: topic %s, want %s", c.subject, a.Topic, c.topic)
		}
	}
	e.stop()
	if got, want := topicNames(t, dir), []string{"_overflow", "good_a", "good_b"}; !slices.Equal(got, want) {
		t.Fatalf("topics %v, want %v", got, want)
	}
}
