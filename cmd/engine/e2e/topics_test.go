package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	e := startEngine(t, dir, "--topics", "device.*.temp,orders.>=orders_all", "--max-topics", "2", "--http", "127.0.0.1:0")
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
	again, raw := request(t, nc, &nats.Msg{Subject: "x.1", Data: []byte("again")})
	if again.Topic != "x_1" {
		t.Fatalf("x.1 again: %s", raw)
	}
	waitReadable(t, nc, again) // dispatched: every queue the messages made exists
	m := scrapeMetrics(t, e.http)
	if n := m["rocketstore_consumequeues"]; n < 5 || n > 5*4 {
		t.Errorf("%v ConsumeQueues for %d subjects, want at most 5 topics x 4 queues", n, len(order)+devices)
	}
	if line, _, ok := e.findLog(0, "ingress: topic limit reached"); !ok || line["subject"] != "x.3" || line["max_topics"] != 2.0 {
		t.Errorf("limit log %v (found %v), want one naming x.3 and the limit", line, ok)
	}
	code, body := httpGet(t, e.http+"/status")
	var status struct {
		Ingress struct {
			RuleTopics     int `json:"rule_topics"`
			MaxTopics      int `json:"max_topics"`
			OverflowRoutes int `json:"overflow_routes"`
		} `json:"ingress"`
	}
	if err := json.Unmarshal([]byte(body), &status); code != 200 || err != nil ||
		status.Ingress.RuleTopics != 2 || status.Ingress.MaxTopics != 2 || status.Ingress.OverflowRoutes != 3 {
		t.Errorf("/status (%d, %v): ingress %+v, want 2 rule topics of at most 2, 3 overflow routes", code, err, status.Ingress)
	}
	if m["rocketstore_ingress_rule_topics"] != 2 || m["rocketstore_ingress_overflow_routes_total"] != 3 {
		t.Errorf("metrics: rule topics %v, overflow routes %v; want 2 and 3 (x.3, x.4, device.1.hum)",
			m["rocketstore_ingress_rule_topics"], m["rocketstore_ingress_overflow_routes_total"])
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

	// After a restart the store's topics count: x.5 is past the limit, x.2 keeps its topic; the
	// same after a kill -9, whose restart recovers the queues from the CommitLog.
	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		e = e.restart(t)
		nc = connect(t, e.url)
		for s, topic := range map[string]string{"x.5": "_overflow", "x.2": "x_2", "device.9.temp": "device"} {
			if a, raw := request(t, nc, &nats.Msg{Subject: s, Data: []byte(s)}); a.Topic != topic {
				t.Errorf("after a restart (%s before it), %s: %s, want topic %s", how, s, raw, topic)
			}
		}
		if how == "SIGTERM" {
			e.kill()
		} else {
			e.stop()
		}
	}
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

// TestReadBySubject: get and pull on the wire and `engine get` online and offline take a subject
// or a pattern within a topic and return exactly the messages on matching subjects, in order;
// an invalid subject filter is a 400 (a usage error for the CLI). README, "Read it back".
func TestReadBySubject(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--topics", "device.*.temp", "--queues", "1")
	nc := connect(t, e.url)
	subjects := []string{"device.1.temp", "device.2.temp", "device.1.temp", "device.3.temp", "device.1.temp", "device.22.temp"}
	var last ack
	for i, s := range subjects {
		last = stored(t, nc, msg(s, fmt.Sprint(i)))
	}
	// A subject longer than the pattern is not the pattern's: it gets a topic of its own.
	if longer := stored(t, nc, msg("device.1.temp.x", "longer")); longer.Topic == "device" {
		t.Errorf("device.1.temp.x went to topic %s, which device.*.temp declares", longer.Topic)
	}
	waitReadable(t, nc, last)
	want := func(filter string) (bodies []string) {
		for i, s := range subjects {
			if natsMatch(filter, s) {
				bodies = append(bodies, fmt.Sprint(i))
			}
		}
		return bodies
	}
	bodiesOf := func(msgs []map[string]any) (bodies []string) {
		for _, m := range msgs {
			b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["body"]))
			bodies = append(bodies, string(b))
		}
		return bodies
	}
	for _, filter := range []string{"device.1.temp", "device.*.temp", "device.>", "device.2.temp", "device.9.temp", "device.*"} {
		req, _ := json.Marshal(map[string]any{"topic": "device", "queueId": 0, "offset": 0, "max": 100, "subject": filter})
		rep, err := nc.Request("$RS.API.get", req, waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Messages []map[string]any `json:"messages"`
			Status   string           `json:"status"`
		}
		if err := json.Unmarshal(rep.Data, &got); err != nil {
			t.Fatalf("get %s: %q: %v", filter, rep.Data, err)
		}
		if b := bodiesOf(got.Messages); !slices.Equal(b, want(filter)) {
			t.Errorf("get subject %s: bodies %v (%s), want %v", filter, b, got.Status, want(filter))
		}
		if b := pullBodies(t, nc, map[string]any{"topic": "device", "queueId": 0, "offset": 0, "max": 100, "subject": filter}); !slices.Equal(b, want(filter)) {
			t.Errorf("pull subject %s: bodies %v, want %v", filter, b, want(filter))
		}
		r := runCLI(t, append([]string{"get", "--topic", "device", "--queue", "0", "--subject", filter, "--json"}, online(e.url)...)...)
		if b := bodiesOf(ndjsonOrNone(t, r.stdout)); !slices.Equal(b, want(filter)) {
			t.Errorf("engine get --subject %s online: bodies %v (exit %d, %s), want %v", filter, b, r.code, r.stderr, want(filter))
		}
	}
	// A replay of one subject of the topic, paced, onto a subject a plain subscriber reads.
	out := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe("replayed.device", out)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, append([]string{"replay", "--topic", "device", "--offset", "0", "--to", "replayed.device",
		"--rate", "1000", "--subject", "device.1.temp"}, online(e.url)...)...); r.code != 0 {
		t.Fatalf("engine replay --subject: exit %d: %s", r.code, r.stderr)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var replayed []string
	for end := false; !end; {
		select {
		case m := <-out:
			if end = m.Header.Get("Rs-Replay-End") == "true"; end {
				if n := m.Header.Get("Rs-Replay-Count"); n != fmt.Sprint(len(want("device.1.temp"))) {
					t.Errorf("replay end: count %s, want %d", n, len(want("device.1.temp")))
				}
				continue
			}
			replayed = append(replayed, string(m.Data))
		case <-time.After(waitTimeout):
			t.Fatalf("replayed %v and no end, want %v", replayed, want("device.1.temp"))
		}
	}
	sub.Unsubscribe()
	if !slices.Equal(replayed, want("device.1.temp")) {
		t.Errorf("replay --subject device.1.temp sent %v, want %v", replayed, want("device.1.temp"))
	}
	rep, err := nc.Request("$RS.API.get", []byte(`{"topic":"device","queueId":0,"subject":"device..temp"}`), waitTimeout)
	if err != nil || !strings.Contains(string(rep.Data), `"code":400`) || !strings.Contains(string(rep.Data), "subject") {
		t.Errorf("an invalid subject filter: %s, %v; want a 400 naming it", rep.Data, err)
	}
	e.stop()
	r := runCLI(t, append([]string{"get", "--topic", "device", "--queue", "0", "--subject", "device.1.temp", "--json"}, offline(dir)...)...)
	if b := bodiesOf(ndjsonOrNone(t, r.stdout)); !slices.Equal(b, want("device.1.temp")) {
		t.Errorf("engine get --subject offline: bodies %v (exit %d, %s)", b, r.code, r.stderr)
	}
	if r := runCLI(t, append([]string{"get", "--topic", "device", "--queue", "0", "--subject", "a b"}, offline(dir)...)...); r.code == 0 ||
		!strings.Contains(r.stderr, "--subject") {
		t.Errorf("engine get --subject 'a b': exit %d, %s", r.code, r.stderr)
	}
}

// pullBodies runs one $RS.API.pull and returns the bodies of the messages it sent.
func pullBodies(t *testing.T, nc *nats.Conn, req map[string]any) []string {
	t.Helper()
	msgs, _ := pull(t, nc, req)
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, string(m.Data))
	}
	return bodies
}

// pull runs one $RS.API.pull: the messages it sent, then its end message.
func pull(t *testing.T, nc *nats.Conn, req map[string]any) (msgs []*nats.Msg, end *nats.Msg) {
	t.Helper()
	inbox := nats.NewInbox()
	got := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	data, _ := json.Marshal(req)
	if err := nc.PublishRequest("$RS.API.pull", inbox, data); err != nil {
		t.Fatal(err)
	}
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for range 100_000 {
		select {
		case m := <-got:
			if m.Reply == "" { // the end message
				return msgs, m
			}
			msgs = append(msgs, m)
		case <-timeout.C:
			t.Fatalf("pull %v: no end message within %v", req, waitTimeout)
		}
	}
	t.Fatalf("pull %v: no end message", req)
	return nil, nil
}

// ndjsonOrNone is ndjson, and nothing for empty output.
func ndjsonOrNone(t *testing.T, out string) []map[string]any {
	t.Helper()
	if strings.TrimSpace(out) == "" {
		return nil
	}
	return ndjson(t, out)
}

// natsMatch is NATS subject matching, written here from the NATS docs (the test's own copy).
func natsMatch(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}
