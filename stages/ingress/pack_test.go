package ingress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// packEntry is one entry to encode in a test pack.
type packEntry struct {
	hdr  string // the header block, "" for none
	data string
}

// appendPack encodes entries as a pack body (pack.go).
func appendPack(dst []byte, entries ...packEntry) []byte {
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e.hdr)))
		dst = append(dst, e.hdr...)
		dst = binary.AppendUvarint(dst, uint64(len(e.data)))
		dst = append(dst, e.data...)
	}
	return dst
}

func packMsg(subject, seq, count string, body []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Reply, m.Data = "ack.s", body
	m.Header.Set(wire.HeaderSeq, seq)
	m.Header.Set(wire.HeaderPack, count)
	return m
}

func TestDecodePack(t *testing.T) {
	body := appendPack(nil,
		packEntry{data: "a"},
		packEntry{hdr: "NATS/1.0\r\nNats-Msg-Id: m2\r\nTrace: x\r\n\r\n", data: "bb"},
		packEntry{},
	)
	m := packMsg("orders.eu", "s 7 3", "3", body)
	sh, err := parseSeqHeader(m.Header[wire.HeaderSeq])
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := decodePack(nil, m, m.Header[wire.HeaderPack], sh)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	for i, want := range []string{"a", "bb", ""} {
		e := msgs[i]
		if string(e.Data) != want || e.Subject != "orders.eu" || e.Reply != "ack.s" {
			t.Errorf("entry %d: %q on %q reply %q", i, e.Data, e.Subject, e.Reply)
		}
	}
	if msgs[1].Header.Get(nats.MsgIdHdr) != "m2" || msgs[1].Header.Get("Trace") != "x" || msgs[0].Header != nil {
		t.Errorf("headers %v, %v", msgs[0].Header, msgs[1].Header)
	}
	if cap(msgs[0].Data) != 1 {
		t.Error("an entry's data may run into the next entry's bytes")
	}
}

func TestDecodePackErrors(t *testing.T) {
	one := appendPack(nil, packEntry{data: "a"})
	two := appendPack(nil, packEntry{data: "a"}, packEntry{data: "b"})
	cases := []struct {
		name, seq, count string
		body             []byte
		why              string
	}{
		{"count zero", "s 1 0", "0", one, "count"},
		{"count sign", "s 1 0", "+1", one, "count"},
		{"count text", "s 1 0", "x", one, "count"},
		{"count too big", "s 1 0", fmt.Sprint(wire.MaxPackEntries + 1), one, "count"},
		{"more than the body holds", "s 1 0", "1000", two, "cannot fit"},
		{"fewer entries than counted", "s 1 0", "2", append(slices.Clone(one), 0), "body ends"},
		{"bytes after the last", "s 1 0", "1", two, "after the last"},
		{"length past the end", "s 1 0", "1", []byte{0, 9, 'a'}, "past the body"},
		{"length overflow", "s 1 0", "1", append([]byte{0}, bytes.Repeat([]byte{0xff}, 11)...), "overflows"},
		{"bad header block", "s 1 0", "1", appendPack(nil, packEntry{hdr: "HTTP/1.1\r\n\r\n"}), "header block"},
		{"nested seq", "s 1 0", "1", appendPack(nil, packEntry{hdr: "NATS/1.0\r\nRs-Seq: s 1 0\r\n\r\n"}), "must not carry"},
		{"nested pack", "s 1 0", "1", appendPack(nil, packEntry{hdr: "NATS/1.0\r\nRs-Pack: 1\r\n\r\n"}), "must not carry"},
		{"past 2^63-1", "s 9223372036854775807 0", "2", two, "past 2^63-1"},
	}
	for _, c := range cases {
		m := packMsg("x", c.seq, c.count, c.body)
		sh, err := parseSeqHeader(m.Header[wire.HeaderSeq])
		if err != nil {
			t.Fatal(err)
		}
		_, err = decodePack(nil, m, m.Header[wire.HeaderPack], sh)
		if err == nil || !strings.Contains(err.Error(), c.why) || ReplyCode(err) != wire.CodeInvalid {
			t.Errorf("%s: %v, want an error about %q (400)", c.name, err, c.why)
		}
	}
	m := packMsg("x", "s 1 0", "1", one)
	m.Header.Add(wire.HeaderPack, "1")
	if _, err := decodePack(nil, m, m.Header[wire.HeaderPack], wire.SeqHeader{Seq: 1}); err == nil {
		t.Error("two Rs-Pack values accepted")
	}
}

// TestBatchedPacks: through a real NATS server, a pack is split into its messages, each stored
// with its own sequence, id and headers, and acked as the stream's messages; an entry refused
// for itself (a reserved header name) is refused alone; a malformed pack is refused whole with a
// plain reply, and nothing of it is stored.
func TestBatchedPacks(t *testing.T) {
	b := newBatchedHarness(t, batched.Config{})
	body := appendPack(nil,
		packEntry{data: "one"},
		packEntry{hdr: "NATS/1.0\r\nNats-Msg-Id: own-id\r\nTrace: t\r\n\r\n", data: "two"},
		packEntry{hdr: "NATS/1.0\r\nDELAY: 3\r\n\r\n", data: "refused"},
		packEntry{data: "four"},
	)
	m := packMsg("orders.packed", "P 1 0", "4", body)
	m.Reply = b.inbox + ".P"
	if err := b.pub.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	b.send("P", 5, 0, "orders.packed", nil) // a plain batched message after the pack
	a := b.next()
	for a.Through < 2 || len(storedSeqs(a))+len(a.Refused) < 5 {
		more := b.next()
		a.Stored, a.Refused, a.Through = append(a.Stored, more.Stored...), append(a.Refused, more.Refused...), more.Through
	}
	if got := storedSeqs(a); !slices.Equal(got, []uint64{1, 2, 4, 5}) || len(a.Refused) != 1 || a.Refused[0].Seq != 3 ||
		a.Refused[0].Code != wire.CodeInvalid || a.Through != 2 {
		t.Fatalf("acks %+v", a)
	}
	recs := b.app.snapshot()
	if len(recs) != 4 {
		t.Fatalf("%d records stored, want 4", len(recs))
	}
	ids := map[string]string{}
	for _, r := range recs {
		props := commitlog.Properties(r.rec.Properties)
		id, _ := props.Get(commitlog.PropUniqKey)
		ids[string(r.rec.Body)] = string(id)
		if _, ok := props.Get(wire.HeaderPack); ok {
			t.Errorf("%s: the pack header was stored", r.rec.Body)
		}
		if string(r.rec.Body) == "two" {
			if v, _ := props.Get("Trace"); string(v) != "t" {
				t.Errorf("entry two's header Trace = %q", v)
			}
		}
	}
	if want := map[string]string{"one": "P:1", "two": "own-id", "four": "P:4", "P-5": "P:5"}; !maps.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}

	bad := packMsg("orders.packed", "Q 1 0", "3", appendPack(nil, packEntry{data: "x"}))
	if _, err := b.request(bad); err == nil || !strings.Contains(err.Error(), "(400)") {
		t.Fatalf("a malformed pack: reply %v", err)
	}
	if n := len(b.app.snapshot()); n != 4 {
		t.Fatalf("%d records after a malformed pack, want 4", n)
	}
}

// TestPackRuns: a pack goes to the workers in runs (onPack). The entries without a queue key all
// land in one queue, the topic's next for each pack; an entry with a key lands in its key's
// queue; runs are cut at MaxBatch entries; and every queue keeps the entries in sequence order.
func TestPackRuns(t *testing.T) {
	const maxBatch = 8
	b := newBatchedHarnessWith(t, batched.Config{}, func(c *Config) { c.MaxBatch = maxBatch })
	keyed := map[int]string{10: "k-a", 25: "k-b", 26: "k-a"}
	const count = 30
	var entries []packEntry
	for i := range count {
		e := packEntry{data: fmt.Sprintf("e%d", i)}
		if k, ok := keyed[i]; ok {
			e.hdr = "NATS/1.0\r\nRmq-Keys: " + k + "\r\n\r\n"
		}
		entries = append(entries, e)
	}
	for p, first := range []uint64{1, 1 + count} {
		m := packMsg("orders.runs", fmt.Sprintf("R %d 0", first), fmt.Sprint(count), appendPack(nil, entries...))
		m.Reply = b.inbox + ".R"
		if err := b.pub.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		for a := b.next(); a.Through < first+count-1; a = b.next() {
			if len(a.Refused) > 0 {
				t.Fatalf("pack %d: refused %+v", p, a.Refused)
			}
		}
	}
	b.app.wait(t, 2*count)
	sticky := map[int]int32{} // pack -> the queue of its entries without a key
	lastSeq := map[int32]uint64{}
	for _, r := range b.app.snapshot() {
		id, _ := commitlog.Properties(r.rec.Properties).Get(commitlog.PropUniqKey)
		seq, err := strconv.ParseUint(strings.TrimPrefix(string(id), "R:"), 10, 64)
		if err != nil {
			t.Fatalf("UNIQ_KEY %q", id)
		}
		p, i := int(seq-1)/count, int(seq-1)%count
		q := r.rec.QueueID
		if k, ok := keyed[i]; ok {
			if want := route.HashQueue(k, 4); q != want {
				t.Errorf("seq %d (key %s) in queue %d, want %d", seq, k, q, want)
			}
		} else if s, ok := sticky[p]; !ok {
			sticky[p] = q
		} else if q != s {
			t.Errorf("seq %d without a key in queue %d; the pack's others are in %d", seq, q, s)
		}
		if seq <= lastSeq[q] {
			t.Errorf("queue %d: seq %d after %d", q, seq, lastSeq[q])
		}
		lastSeq[q] = seq
	}
	if len(sticky) != 2 || sticky[1] != (sticky[0]+1)%4 {
		t.Fatalf("the packs' queues for entries without a key: %v, want consecutive queues", sticky)
	}
	if n := len(b.app.snapshot()); n != 2*count {
		t.Fatalf("%d records stored, want %d", n, 2*count)
	}
	b.app.mu.Lock()
	defer b.app.mu.Unlock()
	if b.app.largest > maxBatch+1 { // a batch may carry one marker beside its messages
		t.Fatalf("a batch of %d records, MaxBatch %d", b.app.largest, maxBatch)
	}
}
