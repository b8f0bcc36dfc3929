package console

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/rocketstore/engine/engine"
)

// searchPages pages through a search and returns every message, checking each page's size.
func searchPages(t *testing.T, c *Console, params map[string]string, limit int) ([]SummaryJSON, string) {
	t.Helper()
	v := vals("limit", strconv.Itoa(limit))
	for k, x := range params {
		v.Set(k, x)
	}
	var all []SummaryJSON
	mode := ""
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("no end after 10,000 pages")
		}
		var p page
		getJSON(t, c, "/console/api/messages", v, &p)
		if len(p.Messages) > limit {
			t.Fatalf("page %d: %d messages, over the limit %d", pages, len(p.Messages), limit)
		}
		all, mode = append(all, p.Messages...), p.Mode
		if p.Next == "" {
			return all, mode
		}
		if p.Next == v.Get("cursor") {
			t.Fatalf("page %d: the cursor did not move: %s", pages, p.Next)
		}
		v.Set("cursor", p.Next)
	}
}

type stored struct {
	id      string
	ts      int64
	queue   int32
	subject string
}

// TestSearchByTimePaged: 1,200 messages over four queues, in batches of one store time each, the
// queues filled unevenly. A search by time pages through exactly the messages of its range, each
// once, in store-time order across the queues, whatever the page size; with a subject pattern,
// exactly those of matching subjects.
func TestSearchByTimePaged(t *testing.T) {
	clk := newClock()
	e := openEngine(t, clk)
	c := newConsole(t, Options{}, Target{Store: e})
	rng := rand.New(rand.NewPCG(1, 2))
	var all []stored
	for batch := range 120 {
		clk.advance(int64(1 + rng.IntN(3)))
		var msgs []engine.Message
		for i := range 10 {
			q := int32(rng.IntN(4))
			if q == 3 && batch%2 == 0 {
				q = 0 // queue 3 gets fewer
			}
			subject := fmt.Sprintf("orders.%s.%d", []string{"eu", "us"}[i%2], batch)
			msgs = append(msgs, engine.Message{Topic: "orders", QueueID: q, Body: []byte(subject),
				Properties: map[string]string{"NATS_SUBJECT": subject}})
		}
		for _, r := range put(t, e, msgs...) {
			m := msgs[len(all)%10]
			all = append(all, stored{id: r.MsgID, ts: r.StoreTimestamp, queue: r.QueueID, subject: m.Properties["NATS_SUBJECT"]})
		}
	}
	first, last := all[0].ts, all[len(all)-1].ts
	begin, end := first+(last-first)/4, first+3*(last-first)/4
	want := func(pattern string) []string {
		var ids []string
		for _, s := range all {
			if s.ts >= begin && s.ts <= end && (pattern == "" || pattern == "orders.eu.>" && s.subject[7:9] == "eu") {
				ids = append(ids, s.id)
			}
		}
		return ids
	}
	check := func(got []SummaryJSON, wantIDs []string, what string) {
		t.Helper()
		var ids []string
		for i, m := range got {
			ids = append(ids, m.MsgID)
			if m.StoreTime < begin || m.StoreTime > end {
				t.Fatalf("%s: message %d stored at %d, outside [%d, %d]", what, i, m.StoreTime, begin, end)
			}
			if i > 0 && m.StoreTime < got[i-1].StoreTime {
				t.Fatalf("%s: message %d stored at %d, before the one listed before it (%d)", what, i, m.StoreTime, got[i-1].StoreTime)
			}
		}
		slices.Sort(ids)
		sorted := slices.Clone(wantIDs)
		slices.Sort(sorted)
		if !slices.Equal(ids, sorted) {
			t.Fatalf("%s: %d messages, want the %d of the range", what, len(ids), len(wantIDs))
		}
	}
	for _, limit := range []int{1, 7, 50, 500} {
		got, mode := searchPages(t, c, map[string]string{"topic": "orders", "begin": strconv.FormatInt(begin, 10), "end": strconv.FormatInt(end, 10)}, limit)
		if mode != "time" {
			t.Fatalf("mode %q", mode)
		}
		check(got, want(""), fmt.Sprintf("pages of %d", limit))
	}
	got, _ := searchPages(t, c, map[string]string{"topic": "orders", "begin": strconv.FormatInt(begin, 10),
		"end": strconv.FormatInt(end, 10), "subject": "orders.eu.>"}, 9)
	check(got, want("orders.eu.>"), "subject orders.eu.>")
	// No bounds: everything, oldest first; an RFC 3339 begin is the same as its ms.
	if got, _ := searchPages(t, c, map[string]string{"topic": "orders"}, 100); len(got) != len(all) {
		t.Fatalf("no bounds: %d messages, want %d", len(got), len(all))
	}
	for _, bad := range []map[string]string{{"topic": "orders", "begin": "yesterday"}, {"topic": "orders", "cursor": "x"},
		{"topic": "orders", "subject": "a..b"}, {"key": "k"}} {
		v := vals()
		for k, x := range bad {
			v.Set(k, x)
		}
		if w := c.do(request{path: "/console/api/messages", params: v}); w.Code != http.StatusBadRequest {
			t.Fatalf("%v: %d %s", bad, w.Code, w.Body)
		}
	}
	if w := c.do(request{path: "/console/api/messages", params: vals("topic", "nope")}); w.Code != http.StatusNotFound {
		t.Fatalf("unknown topic: %d %s", w.Code, w.Body)
	}
}

// TestSearchByKeyAndID: 150 messages of one key (more than RocketMQ's query returns) page through
// by key, each once, newest first; a publisher's message id finds its message, and so does an
// offset message id, without a topic.
func TestSearchByKeyAndID(t *testing.T) {
	e := openEngine(t, newClock())
	c := newConsole(t, Options{}, Target{Store: e})
	var ids []string
	for i := range 150 {
		r := put(t, e, engine.Message{Topic: "orders_eu", QueueID: int32(i % 4), Body: fmt.Appendf(nil, "order %d", i),
			Keys: []string{"customer-7", fmt.Sprint("order-", i)}, MsgID: fmt.Sprint("pub-", i)})
		ids = append(ids, r[0].MsgID)
		put(t, e, engine.Message{Topic: "other", Body: []byte("x"), Keys: []string{"customer-7"}})
	}
	// A message whose KEYS holds another's Nats-Msg-Id: a search by that id finds only the other.
	put(t, e, engine.Message{Topic: "orders_eu", Body: []byte("mentions pub-17"), Keys: []string{"pub-17"}})
	slices.Reverse(ids)
	for _, limit := range []int{1, 40, 500} {
		got, mode := searchPages(t, c, map[string]string{"topic": "orders_eu", "key": "customer-7"}, limit)
		var gotIDs []string
		for _, m := range got {
			gotIDs = append(gotIDs, m.MsgID)
		}
		if mode != "key" || !slices.Equal(gotIDs, ids) {
			t.Fatalf("pages of %d (%s): %d messages, want the 150 newest first", limit, mode, len(gotIDs))
		}
	}
	got, mode := searchPages(t, c, map[string]string{"topic": "orders_eu", "id": "pub-17"}, 10)
	if mode != "uniq_key" || len(got) != 1 || got[0].UniqKey != "pub-17" || got[0].Preview != "order 17" {
		t.Fatalf("by Nats-Msg-Id: %s %+v", mode, got)
	}
	got, mode = searchPages(t, c, map[string]string{"id": ids[3]}, 10)
	if mode != "msg_id" || len(got) != 1 || got[0].MsgID != ids[3] {
		t.Fatalf("by offset id: %s %+v", mode, got)
	}
	if w := c.do(request{path: "/console/api/messages", params: vals("id", "pub-17")}); w.Code != http.StatusBadRequest {
		t.Fatalf("a Nats-Msg-Id without a topic: %d %s", w.Code, w.Body)
	}
}

// TestSearchByTimeLargeBodies: with bodies of 64 KiB a read of a queue stops at its byte bound,
// a few messages in, so the queues are read to different times: a page takes only what comes
// before the earliest of them, and the pages stay in store-time order.
func TestSearchByTimeLargeBodies(t *testing.T) {
	clk := newClock()
	e := openEngine(t, clk)
	c := newConsole(t, Options{}, Target{Store: e})
	body := make([]byte, 64<<10)
	n := 0
	for i := range 120 {
		clk.advance(1)
		// Queue 0 gets a message every time, the others every fourth: read by bytes, queue 0
		// reaches a later time than they do.
		msgs := []engine.Message{{Topic: "big", QueueID: 0, Body: body}}
		if i%4 == 0 {
			msgs = append(msgs, engine.Message{Topic: "big", QueueID: int32(1 + i%3), Body: body})
		}
		n += len(put(t, e, msgs...))
	}
	got, _ := searchPages(t, c, map[string]string{"topic": "big"}, 50)
	if len(got) != n {
		t.Fatalf("%d messages, want %d", len(got), n)
	}
	for i := 1; i < len(got); i++ {
		if got[i].StoreTime < got[i-1].StoreTime {
			t.Fatalf("message %d stored at %d, before the one listed before it (%d)", i, got[i].StoreTime, got[i-1].StoreTime)
		}
	}
}
