package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/rocketstore/engine/engine"
)

// listAll pages through a list (topics or groups) and returns the names in order.
func listAll(t *testing.T, c *Console, path, q string, limit int, name func(json.RawMessage) string) ([]string, int) {
	t.Helper()
	v := vals("q", q, "limit", strconv.Itoa(limit))
	var out []string
	total := -1
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("no end after 10,000 pages")
		}
		var p page
		getJSON(t, c, path, v, &p)
		items := append(p.Topics, p.Groups...)
		if len(items) > limit || limit > maxPage && len(items) > maxPage {
			t.Fatalf("page %d of %s: %d items, over the limit %d", pages, path, len(items), min(limit, maxPage))
		}
		if total >= 0 && p.Total != total {
			t.Fatalf("the total moved from %d to %d", total, p.Total)
		}
		total = p.Total
		for _, it := range items {
			out = append(out, name(it))
		}
		if p.Next == "" {
			return out, total
		}
		v.Set("after", p.Next)
	}
}

func field(key string) func(json.RawMessage) string {
	return func(m json.RawMessage) string {
		var x map[string]any
		_ = json.Unmarshal(m, &x)
		return fmt.Sprint(x[key])
	}
}

// TestTopicsPagedAndSearchable: 3,000 topics come a page at a time (never more than the page
// size, at most 500), every one once, in name order, with the count; a search narrows them.
func TestTopicsPagedAndSearchable(t *testing.T) {
	e := openEngine(t, nil)
	c := newConsole(t, Options{}, Target{Store: e})
	const n = 3000
	for i := 0; i < n; i += 100 {
		var msgs []engine.Message
		for j := i; j < i+100; j++ {
			msgs = append(msgs, engine.Message{Topic: name(j), Body: []byte("x")})
		}
		put(t, e, msgs...)
	}
	for _, limit := range []int{50, 10_000} {
		names, total := listAll(t, c, "/console/api/topics", "", limit, field("name"))
		if total != n || len(names) != n {
			t.Fatalf("pages of %d: %d topics listed, total %d, want %d", limit, len(names), total, n)
		}
		for i, got := range names {
			if got != name(i) {
				t.Fatalf("topic %d is %s, want %s", i, got, name(i))
			}
		}
	}
	names, total := listAll(t, c, "/console/api/topics", "T0299", 7, field("name")) // case-insensitive
	if total != 10 || len(names) != 10 || names[0] != "t02990" || names[9] != "t02999" {
		t.Fatalf("search t0299: %d of %d: %v", len(names), total, names)
	}
	// One topic: its queue, bounds, span and last minute.
	var tp struct {
		Topic TopicJSON
	}
	getJSON(t, c, "/console/api/topic", vals("topic", "t00042"), &tp)
	if q := tp.Topic.Queues; len(q) != 1 || q[0].Min != 0 || q[0].Max != 1 || q[0].MinTime == 0 || tp.Topic.LastMinute != 1 || tp.Topic.Messages != 1 {
		t.Fatalf("topic t00042: %+v", tp.Topic)
	}
	if w := c.do(request{path: "/console/api/topic", params: vals("topic", "nope")}); w.Code != http.StatusNotFound {
		t.Fatalf("unknown topic: %d", w.Code)
	}
}

// TestGroupsPagedAndSearchable: 2,500 groups (offsets committed, no members) come a page at a
// time, every one once; a search narrows them; one group shows its queues' offsets and lag.
func TestGroupsPagedAndSearchable(t *testing.T) {
	srv := serveEngine(t, nil)
	c := newConsole(t, Options{}, ServerTarget(srv))
	e := srv.Engine
	put(t, e, engine.Message{Topic: "orders", QueueID: 0, Body: []byte("a")}, engine.Message{Topic: "orders", QueueID: 0, Body: []byte("b")})
	const n = 2500
	for i := range n {
		if err := e.CommitOffset(fmt.Sprintf("g%05d", i), "orders", 0, int64(i%2)); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{100, 10_000} {
		names, total := listAll(t, c, "/console/api/groups", "", limit, field("group"))
		if total != n || len(names) != n {
			t.Fatalf("pages of %d: %d groups listed, total %d, want %d", limit, len(names), total, n)
		}
		for i, got := range names {
			if want := fmt.Sprintf("g%05d", i); got != want {
				t.Fatalf("group %d is %s, want %s", i, got, want)
			}
		}
	}
	names, total := listAll(t, c, "/console/api/groups", "G0123", 3, field("group"))
	if total != 10 || len(names) != 10 || names[0] != "g01230" {
		t.Fatalf("search g0123: %d of %d: %v", len(names), total, names)
	}
	var g GroupJSON
	getJSON(t, c, "/console/api/group", vals("topic", "orders", "group", "g00001"), &g)
	if g.Members != 0 || g.LagMessages != 1 || len(g.Queues) == 0 || g.Queues[0].Committed != 1 || g.Queues[0].Max != 2 {
		t.Fatalf("group g00001: %+v", g)
	}
	if w := c.do(request{path: "/console/api/group", params: vals("topic", "orders", "group", "nope")}); w.Code != http.StatusNotFound {
		t.Fatalf("unknown group: %d", w.Code)
	}
	if w := c.do(request{path: "/console/api/groups", params: vals("after", "%%%")}); w.Code != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d", w.Code)
	}
}
