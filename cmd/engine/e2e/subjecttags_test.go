package e2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestSubjectTagsFromOutside: a declared topic new to the store keeps each message's subject as
// its TAGS, so its ConsumeQueue's tag codes are the subjects' Java hashes (what a RocketMQ
// consumer filters by, and what a read of one subject skips by); a tags header there is kept as
// an ordinary header. The overflow topic is under the rule too. The rule is in the store
// (config/subjectTags.json) and holds across a restart; a topic that was stored before it was
// declared keeps the TAGS its publishers set, and the log says so; --no-subject-tags keeps new
// declared topics out of it; a damaged file stops a start and a read with what to do. `engine
// verify` passes on the store. docs/CONFIG.md, "Reading one subject of a declared topic".
func TestSubjectTagsFromOutside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--topics", "device.*.temp", "--queues", "1", "--max-topics", "1")
	nc := connect(t, e.url)
	subjects := []string{"device.1.temp", "device.2.temp", "device.1.temp", "device.33.temp", "device.1.temp"}
	for i, s := range subjects {
		stored(t, nc, msg(s, fmt.Sprint(i)))
	}
	stored(t, nc, msg("device.2.temp", "tagged", "Rmq-Tags", "hot"))
	subjects = append(subjects, "device.2.temp")
	// Stored by the rule, not declared: its TAGS is the header's.
	stored(t, nc, msg("legacy.x", "legacy", "Rmq-Tags", "hot"))
	// Past the topic limit of 1: _overflow, a wide topic, is under the rule too.
	last := stored(t, nc, msg("spill.z", "spilled", "Rmq-Tags", "hot"))
	waitReadable(t, nc, last)
	if got := getAll(t, nc, "_overflow", "spill.z"); len(got) != 1 || got[0].Properties["TAGS"] != "spill.z" ||
		got[0].Properties["Rmq-Tags"] != "hot" {
		t.Errorf("_overflow: %+v, want TAGS spill.z and Rmq-Tags hot", got)
	}

	msgs := getAll(t, nc, "device", "")
	if len(msgs) != len(subjects) {
		t.Fatalf("get device: %d messages, want %d", len(msgs), len(subjects))
	}
	for i, m := range msgs {
		p := m.Properties
		if p["TAGS"] != subjects[i] || p["NATS_SUBJECT"] != subjects[i] {
			t.Errorf("message %d: TAGS %q NATS_SUBJECT %q, want both %q", i, p["TAGS"], p["NATS_SUBJECT"], subjects[i])
		}
	}
	if h := msgs[len(msgs)-1].Properties["Rmq-Tags"]; h != "hot" {
		t.Errorf("the tags header in a topic under the rule: property Rmq-Tags %q, want it kept as %q", h, "hot")
	}
	// pull rebuilds the NATS headers: the publisher's Rmq-Tags, never the subject as tags.
	pulled, _ := pull(t, nc, map[string]any{"topic": "device", "queueId": 0, "offset": 0, "max": 100})
	if len(pulled) != len(subjects) {
		t.Fatalf("pull device: %d messages, want %d", len(pulled), len(subjects))
	}
	for i, m := range pulled {
		want := []string(nil)
		if i == len(subjects)-1 {
			want = []string{"hot"}
		}
		if got := m.Header.Values("Rmq-Tags"); !slices.Equal(got, want) {
			t.Errorf("pulled message %d: Rmq-Tags %q, want %q", i, got, want)
		}
	}
	if got := getAll(t, nc, "device", "device.2.temp"); len(got) != 2 || string(got[1].Body) != "tagged" {
		t.Errorf("get --subject device.2.temp: %d messages, want 2 ending with the tagged one", len(got))
	}
	if got := getAll(t, nc, "legacy_x", ""); len(got) != 1 || got[0].Properties["TAGS"] != "hot" {
		t.Errorf("a topic of the rule: %+v, want TAGS hot", got)
	}
	e.stop()

	codes := tagCodes(t, dir, "device")
	for i, s := range subjects {
		if i >= len(codes) || codes[i] != int64(javaHash(s)) {
			t.Fatalf("ConsumeQueue tag codes %v: unit %d should be the hash of %q, %d", codes, i, s, javaHash(s))
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "config", "subjectTags.json")); err != nil || !strings.Contains(string(b), `"device"`) ||
		!strings.Contains(string(b), `"_overflow"`) {
		t.Fatalf("config/subjectTags.json: %s, %v; want it to list device and _overflow", b, err)
	}
	if r := runCLI(t, append([]string{"verify", "--store", dir}, sizeArgs...)...); r.code != 0 {
		t.Fatalf("engine verify: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}

	// Restart: legacy_x is declared now, but was stored before; sensor is new, but left out.
	e = startEngine(t, dir, "--topics", "device.*.temp,legacy.>=legacy_x", "--queues", "1")
	if line, _, ok := e.findLog(0, "topics stored before the subject-tag rule could apply to them"); !ok ||
		fmt.Sprint(line["topics"]) != "[legacy_x]" {
		t.Errorf("no log line naming legacy_x as kept out of the rule: %v", line)
	}
	nc = connect(t, e.url)
	stored(t, nc, msg("device.1.temp", "after", "Rmq-Tags", "cold"))
	last = stored(t, nc, msg("legacy.y", "legacy 2", "Rmq-Tags", "cold"))
	waitReadable(t, nc, last)
	if got := getAll(t, nc, "device", "device.1.temp"); len(got) != 4 || got[3].Properties["TAGS"] != "device.1.temp" ||
		got[3].Properties["Rmq-Tags"] != "cold" {
		t.Errorf("after a restart, device.1.temp: %d messages, the last %+v", len(got), got[len(got)-1].Properties)
	}
	if got := getAll(t, nc, "legacy_x", "legacy.y"); len(got) != 1 || got[0].Properties["TAGS"] != "cold" {
		t.Errorf("a topic declared after it was stored: %+v, want TAGS cold (the header's)", got)
	}
	e.stop()

	// A damaged file (and no backup) stops the start with what to do, and so does a read.
	name := filepath.Join(dir, "config", "subjectTags.json")
	good, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(name + ".bak")
	if err := os.WriteFile(name, []byte(`{"topics":["dev`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, runArgs(dir, "--topics", "device.*.temp")...)
	if r.code == 0 || !strings.Contains(r.stderr, "subjectTags.json") || !strings.Contains(r.stderr, "removing") {
		t.Errorf("start on a damaged subjectTags.json: exit %d, stderr %s; want a failure naming the file and what to do", r.code, r.stderr)
	}
	if r := runCLI(t, append([]string{"get", "--topic", "device", "--queue", "0"}, offline(dir)...)...); r.code == 0 ||
		!strings.Contains(r.stderr, "subjectTags.json") {
		t.Errorf("offline get on a damaged subjectTags.json: exit %d, stderr %s", r.code, r.stderr)
	}
	if err := os.WriteFile(name, good, 0o644); err != nil {
		t.Fatal(err)
	}

	e = startEngine(t, dir, "--topics", "device.*.temp,sensor.>", "--queues", "1", "--no-subject-tags")
	nc = connect(t, e.url)
	stored(t, nc, msg("sensor.a", "s", "Rmq-Tags", "warm"))
	last = stored(t, nc, msg("device.3.temp", "d", "Rmq-Tags", "warm"))
	waitReadable(t, nc, last)
	if got := getAll(t, nc, "sensor", ""); len(got) != 1 || got[0].Properties["TAGS"] != "warm" {
		t.Errorf("--no-subject-tags, a new declared topic: %+v, want TAGS warm", got)
	}
	if got := getAll(t, nc, "device", "device.3.temp"); len(got) != 1 || got[0].Properties["TAGS"] != "device.3.temp" {
		t.Errorf("--no-subject-tags, a topic already under the rule: %+v, want TAGS device.3.temp", got)
	}
	e.stop()
}

// wireMsg is a message of the read API's get reply.
type wireMsg struct {
	Properties map[string]string `json:"properties"`
	Body       []byte            `json:"body"`
}

// getAll reads queue 0 of topic from its start with the read API's get, filtered by subject.
func getAll(t *testing.T, nc *nats.Conn, topic, subject string) []wireMsg {
	t.Helper()
	return apiGetAs[wireMsg](t, nc, map[string]any{"topic": topic, "queueId": 0, "offset": 0, "max": 100, "subject": subject})
}

// tagCodes are the tag codes of queue 0 of topic, from its first ConsumeQueue file as RocketMQ
// lays it out: 20-byte units of offset, size and tag code, big-endian.
func tagCodes(t *testing.T, dir, topic string) []int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "consumequeue", topic, "0", strings.Repeat("0", 20)))
	if err != nil {
		t.Fatal(err)
	}
	var codes []int64
	for u := b; len(u) >= 20 && !slices.Equal(u[:20], make([]byte, 20)); u = u[20:] {
		codes = append(codes, int64(binary.BigEndian.Uint64(u[12:20])))
	}
	return codes
}
