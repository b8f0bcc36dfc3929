package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFireAndForgetDropsCountedByTopic: plain publishes (no reply subject) far faster than the
// engine stores them, with small pending limits: every message is either stored or counted as
// dropped, what ingress dropped itself is counted under its topic in /metrics, the topics
// there are the publisher's, and the drops are logged with their rate. README, "What an ack means"; docs/CONFIG.md, pending_msgs.
func TestFireAndForgetDropsCountedByTopic(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--pending-msgs", "64", "--pending-bytes", "256KiB")
	nc := connect(t, e.url)
	const sent = 60_000
	body := []byte(strings.Repeat("x", 512))
	for i := range sent {
		if err := nc.Publish(fmt.Sprintf("flood.s%d", i%4), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil { // the server has every message
		t.Fatal(err)
	}
	// The engine's client reads them after this flush; received + dropped reaches sent. The
	// counters are all there is to wait on from outside.
	var m map[string]float64
	for deadline := time.Now().Add(waitTimeout); ; {
		m = scrapeMetrics(t, e.http)
		if m["rocketstore_ingress_received_messages_total"]+m["rocketstore_ingress_dropped_messages_total"] >= sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %v + dropped %v of %d within %v", m["rocketstore_ingress_received_messages_total"],
				m["rocketstore_ingress_dropped_messages_total"], sent, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	received, dropped := m["rocketstore_ingress_received_messages_total"], m["rocketstore_ingress_dropped_messages_total"]
	if received+dropped != sent {
		t.Fatalf("received %v + dropped %v != sent %d", received, dropped, sent)
	}
	var byTopic float64
	for name, v := range m {
		if topic, ok := strings.CutPrefix(name, `rocketstore_ingress_dropped_by_topic_total{topic="`); ok {
			if topic = strings.TrimSuffix(topic, `"}`); topic != "flood_s0" && topic != "flood_s1" && topic != "flood_s2" && topic != "flood_s3" {
				t.Errorf("drops counted under topic %q", topic)
			}
			byTopic += v
		}
	}
	t.Logf("sent %d: received %v, dropped %v (%v by ingress, counted by topic)", sent, received, dropped, byTopic)
	if byTopic > dropped {
		t.Fatalf("%v dropped by topic, more than the %v dropped", byTopic, dropped)
	}
	// A graceful stop stores everything received.
	e.stop()
	// The drops were logged, with their rate and the topics that lost most.
	if line, _, ok := e.findLog(0, "ingress: fire-and-forget messages dropped"); dropped > 0 &&
		(!ok || line["dropped_per_second"] == nil || line["topics_dropping_most"] == nil && byTopic > 0) {
		t.Fatalf("%v dropped: drop log %v (found %v)", dropped, line, ok)
	}
	var stored int64
	for _, topic := range []string{"flood_s0", "flood_s1", "flood_s2", "flood_s3"} {
		stored += storedCount(t, e.dir, topic)
	}
	if stored != int64(received) {
		t.Fatalf("stored %d, received %v", stored, received)
	}
}

// scrapeMetrics reads /metrics as name (with its labels) -> value.
func scrapeMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// storedCount is how many messages topic's queues hold in the store dir (the engine stopped),
// from `engine offsets --json`.
func storedCount(t *testing.T, dir, topic string) int64 {
	t.Helper()
	var n int64
	for _, q := range ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", topic, "--json"}, offline(dir)...)...)) {
		lo, _ := q["minOffset"].(float64)
		hi, _ := q["maxOffset"].(float64)
		n += int64(hi - lo)
	}
	return n
}
