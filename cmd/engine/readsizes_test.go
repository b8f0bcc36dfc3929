package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/rmqfixture"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// TestReadOfflineSizesFromFiles: a store written by `engine run` with sizes that are not the
// defaults (4 MiB segments, 1000-unit ConsumeQueue files, index files of 1024 slots and 8192
// entries, storeArgs) holding one CommitLog segment is read offline with no size flag, by every
// read command, while the engine runs and after it stopped; a size flag that contradicts the
// files is a usage error that says what the files hold.
func TestReadOfflineSizesFromFiles(t *testing.T) {
	t.Setenv("NATS_URL", "")
	dir := t.TempDir()
	c, url, _ := runEmbedded(t, dir)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var acks []wire.Ack
	for i := range 5 {
		m := nats.NewMsg("orders.eu")
		m.Data = fmt.Appendf(nil, "order %d", i)
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("order-%d", i))
		m.Header.Set(ingress.DefaultKeysHeader, "one-key") // every order in one queue
		reply, err := nc.RequestMsg(m, waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		a, err := wire.ParseReply(reply.Data)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	// An ack means durable; the ConsumeQueue unit follows: wait for the last one to be read
	// offline (another process's progress, polled, bounded).
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		code, out, _ := readCLI(t, "offsets", "--store", dir, "--topic", acks[0].Topic, "--json")
		if code == 0 && strings.Contains(out, fmt.Sprintf(`"maxOffset":%d`, len(acks))) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store does not show %d messages: exit %d\n%s", len(acks), code, out)
		}
		<-tick.C
	}
	segs, err := os.ReadDir(filepath.Join(dir, "commitlog"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("commitlog: %v, %v: want one segment", segs, err)
	}
	check := func(t *testing.T) {
		src := []string{"--store", dir}
		a := acks[len(acks)-1]
		queue := fmt.Sprint(a.QueueID)
		msgs := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", a.Topic, "--queue", queue, "--json")...))
		if len(msgs) != len(acks) {
			t.Fatalf("get: %d messages, want %d", len(msgs), len(acks))
		}
		for i, m := range msgs {
			if m.MsgID != acks[i].MsgID || string(m.Body) != fmt.Sprintf("order %d", i) {
				t.Fatalf("get: message %d is %s %q", i, m.MsgID, m.Body)
			}
		}
		bounds := ndjson[queueBounds](t, mustRead(t, with(src, "offsets", "--topic", a.Topic, "--json")...))
		if len(bounds) != 1 || bounds[0].QueueID != a.QueueID || bounds[0].MaxOffset != int64(len(acks)) {
			t.Fatalf("offsets: %+v", bounds)
		}
		found := ndjson[api.Message](t, mustRead(t, with(src, "query", "--topic", a.Topic, "--key", "order-3", "--json")...))
		if len(found) != 1 || found[0].MsgID != acks[3].MsgID {
			t.Fatalf("query: %+v", found)
		}
		if out := mustRead(t, with(src, "msg", acks[2].MsgID)...); !strings.Contains(out, "order 2") {
			t.Fatalf("msg:\n%s", out)
		}
		if out := mustRead(t, with(src, "topics")...); !strings.Contains(out, a.Topic) {
			t.Fatalf("topics:\n%s", out)
		}
		for _, c := range []struct {
			flags []string
			want  string
		}{
			{[]string{"--commit-log-size", "1GiB"}, fmt.Sprintf("CommitLog segments of %s are %d bytes, not %d", dir, commitLogSize, 1<<30)},
			{[]string{"--cq-units", "300000"}, fmt.Sprintf("hold %d units", cqUnits)},
			{[]string{"--index-slots", "1029", "--index-entries", "8191"}, "written with 1024 slots and 8192 entries"},
		} {
			failRead(t, readUsageExit, c.want, with(src, append([]string{"get", "--topic", a.Topic, "--queue", queue}, c.flags...)...)...)
		}
		mustRead(t, with(src, "get", "--topic", a.Topic, "--queue", queue, "--commit-log-size", "4MiB", "--cq-units",
			fmt.Sprint(cqUnits), "--index-slots", "1024", "--index-entries", "8192")...)
		// The case: every size flag but the segment size (it printed "no messages").
		partial := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", a.Topic, "--queue", queue, "--cq-units",
			fmt.Sprint(cqUnits), "--index-slots", "1024", "--index-entries", "8192", "--json")...))
		if len(partial) != len(acks) {
			t.Fatalf("get without --commit-log-size: %d messages, want %d", len(partial), len(acks))
		}
	}
	t.Run("running", check)
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("engine exited %d", code)
	}
	t.Run("stopped", check)
}

// TestReadCommandsSizesGiven: the read commands read back a store offline as well with the
// sizes it was written with given as flags.
func TestReadCommandsSizesGiven(t *testing.T) {
	f := startReadEngine(t)
	f.stop(t)
	checkReadBack(t, f, []string{"--store", f.dir, "--commit-log-size", fmt.Sprint(rdSegment), "--cq-units",
		fmt.Sprint(rdUnits), "--index-slots", fmt.Sprint(rdSlots), "--index-entries", fmt.Sprint(rdEntries)})
}

// TestReadOfflineRocketMQStore: the store RocketMQ 5.3.3 wrote (4 MiB segments, 500-unit
// ConsumeQueue files, index files of 2000 slots and 8000 entries) is read by every read command
// with no size flag: the messages its .jsonl lists, by queue, by key and by id.
func TestReadOfflineRocketMQStore(t *testing.T) {
	store := filepath.Join(rmqfixture.Dir(t), "store-5000")
	f, err := os.Open(store + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type line struct {
		Topic       string            `json:"topic"`
		QueueID     int32             `json:"queueId"`
		QueueOffset int64             `json:"queueOffset"`
		MsgID       string            `json:"msgId"`
		Props       map[string]string `json:"props"`
		InCQ        bool              `json:"inCQ"`
	}
	perQueue := map[string]int64{}
	var sample []line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.InCQ {
			perQueue[fmt.Sprintf("%s/%d", l.Topic, l.QueueID)]++
		}
		if i%500 == 7 {
			sample = append(sample, l)
		}
	}
	src := []string{"--store", store}
	if out := mustRead(t, with(src, "topics")...); !strings.Contains(out, "jrev_a  0, 1, 2, 3") {
		t.Fatalf("topics:\n%s", out)
	}
	for _, topic := range []string{"jrev_a", "jrev_b", "jrev_c"} {
		for _, b := range ndjson[queueBounds](t, mustRead(t, with(src, "offsets", "--topic", topic, "--json")...)) {
			if want := perQueue[fmt.Sprintf("%s/%d", topic, b.QueueID)]; b.MinOffset != 0 || b.MaxOffset != want {
				t.Fatalf("offsets %+v, want %d messages", b, want)
			}
		}
	}
	for _, l := range sample {
		msgs := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", l.Topic, "--queue", fmt.Sprint(l.QueueID),
			"--offset", fmt.Sprint(l.QueueOffset), "--count", "1", "--json")...))
		if len(msgs) != 1 || msgs[0].MsgID != l.MsgID {
			t.Fatalf("get %s/%d at %d: %+v, want %s", l.Topic, l.QueueID, l.QueueOffset, msgs, l.MsgID)
		}
		if out := mustRead(t, with(src, "msg", l.MsgID, "--json")...); !strings.Contains(out, `"msgId":"`+l.MsgID+`"`) {
			t.Fatalf("msg %s:\n%s", l.MsgID, out)
		}
		found := ndjson[api.Message](t, mustRead(t, with(src, "query", "--topic", l.Topic, "--key", l.Props["UNIQ_KEY"], "--json")...))
		if len(found) != 1 || found[0].MsgID != l.MsgID {
			t.Fatalf("query %s: %+v", l.Props["UNIQ_KEY"], found)
		}
	}
}
