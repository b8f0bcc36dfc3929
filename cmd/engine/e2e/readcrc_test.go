package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestReadsRefuseDamagedRecord: a bit flipped in a stored record (here in its body, in the
// CommitLog file, under a running engine) is served by no read: the read API's get, pull, msg and
// query answer 500 saying which record failed its CRC check and where to read on, a replay ends
// with that error, the CLI's get fails online and offline, a consumer group's member (engine
// consume, the batched read) fails, and /metrics counts the refusals.
// The records around it are still read, and once the byte is put back the record is served again.
// README.md "Safe by default" (every record carries a whole-record CRC).
func TestReadsRefuseDamagedRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--http", "127.0.0.1:0")
	nc := connect(t, e.url)
	var acks []ack
	for i := range 3 {
		acks = append(acks, stored(t, nc, msg("crc.orders", "crc-body-"+strconv.Itoa(i), "Rmq-Keys", "crc-key", "Nats-Msg-Id", "crc-"+strconv.Itoa(i))))
	}
	waitReadable(t, nc, acks...)
	a := acks[1]
	topic, queue := a.Topic, a.QueueID

	// Flip one bit of record 1's body in the CommitLog file (the engine maps the same pages).
	seg := filepath.Join(dir, "commitlog", "00000000000000000000")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	window := make([]byte, 512)
	if _, err := f.ReadAt(window, a.CommitLogOffset); err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(window, []byte("crc-body-1"))
	if at < 0 {
		t.Fatalf("the body is not in the record at %d", a.CommitLogOffset)
	}
	flip := func() {
		t.Helper()
		b := []byte{window[at] ^ 0x01}
		window[at] = b[0]
		if _, err := f.WriteAt(b, a.CommitLogOffset+int64(at)); err != nil {
			t.Fatal(err)
		}
	}
	flip()

	apiErr := func(endpoint string, req map[string]any) *wireError {
		t.Helper()
		data, _ := json.Marshal(req)
		reply, err := nc.Request("$RS.API."+endpoint, data, waitTimeout)
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		var r struct {
			Error *wireError `json:"error"`
		}
		if err := json.Unmarshal(reply.Data, &r); err != nil {
			t.Fatalf("%s: %s", endpoint, reply.Data)
		}
		return r.Error
	}
	crcRefusal := regexp.MustCompile(`CRC`)
	for _, c := range []struct {
		endpoint string
		req      map[string]any
		says     []string
	}{
		{"get", map[string]any{"topic": topic, "queueId": queue, "offset": 0}, []string{"queue offset 1", "from offset 2"}},
		{"get", map[string]any{"topic": topic, "queueId": queue, "offset": 1, "waitMs": 1000}, []string{"queue offset 1"}},
		{"msg", map[string]any{"msgId": a.MsgID}, []string{a.MsgID}},
		{"query", map[string]any{"topic": topic, "key": "crc-key"}, []string{"crc-key"}},
	} {
		e := apiErr(c.endpoint, c.req)
		if e == nil || e.Code != 500 || !crcRefusal.MatchString(e.Description) {
			t.Fatalf("%s %v over the damaged record: %+v, want a 500 that says the CRC check failed", c.endpoint, c.req, e)
		}
		for _, w := range c.says {
			if !strings.Contains(e.Description, w) {
				t.Errorf("%s: %q does not say %q", c.endpoint, e.Description, w)
			}
		}
	}
	// The records around it are served.
	if got := apiGetAs[map[string]any](t, nc, map[string]any{"topic": topic, "queueId": queue, "offset": 2}); len(got) != 1 ||
		got[0]["body"] != b64("crc-body-2") {
		t.Fatalf("past the damage: %v", got)
	}

	// A pull sends what lies before the damage, then ends with the error.
	inbox := nats.NewInbox()
	pulled := make(chan *nats.Msg, 8)
	sub, err := nc.ChanSubscribe(inbox, pulled)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	req, _ := json.Marshal(map[string]any{"topic": topic, "queueId": queue, "offset": 0})
	if err := nc.PublishRequest("$RS.API.pull", inbox, req); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, "the first pulled message", pulled); string(m.Data) != "crc-body-0" {
		t.Fatalf("pulled %q", m.Data)
	}
	end := recv(t, "the end of the pull", pulled)
	if end.Header.Get("Rs-Pull-Status") != "ERROR" || end.Header.Get("Rs-Pull-Error-Code") != "500" ||
		end.Header.Get("Rs-Pull-Next-Offset") != "1" || !crcRefusal.MatchString(end.Header.Get("Rs-Pull-Error")) {
		t.Fatalf("end of the pull: %v", end.Header)
	}

	// The CLI, online and offline, and a replay.
	for _, src := range [][]string{online(e.url), offline(dir)} {
		r := runCLI(t, append([]string{"get", "--topic", topic, "--queue", strconv.Itoa(int(queue))}, src...)...)
		if r.code != 1 || !crcRefusal.MatchString(r.stderr) {
			t.Errorf("get %v: exit %d, stderr %q; want 1 and the CRC failure", src, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "replay", "--topic", topic, "--offset", "0", "--to", "crc.replayed", "--rate", "1000", "--nats", e.url); r.code != 1 ||
		!crcRefusal.MatchString(r.stderr) {
		t.Errorf("replay: exit %d, stderr %q; want 1 and the CRC failure", r.code, r.stderr)
	}
	// A consumer group's member (the batched read) gets what lies before it, then the error.
	if r := runCLI(t, "consume", "--group", "crc", "--topic", topic, "--until-end", "--nats", e.url); r.code != 1 ||
		!crcRefusal.MatchString(r.stderr) || strings.Contains(r.stdout, b64("crc-body-1")) {
		t.Errorf("consume: exit %d, stdout %q, stderr %q; want 1 and the CRC failure, not the record", r.code, r.stdout, r.stderr)
	}

	_, metrics := httpGet(t, e.http+"/metrics")
	m := regexp.MustCompile(`(?m)^rocketstore_read_crc_failures_total (\d+)`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatal("/metrics has no rocketstore_read_crc_failures_total")
	}
	if n, _ := strconv.Atoi(m[1]); n < 7 {
		t.Fatalf("%d CRC failures counted, want at least 7", n)
	}

	flip() // put it back: the same record is served
	if got := apiGetAs[map[string]any](t, nc, map[string]any{"topic": topic, "queueId": queue, "offset": 1, "max": 1}); len(got) != 1 ||
		got[0]["body"] != b64("crc-body-1") {
		t.Fatalf("restored: %v", got)
	}
}
