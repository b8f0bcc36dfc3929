package reader

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// searchAll pages through a key search and returns the offsets of every message, with the pages.
func searchAll(t *testing.T, r *Reader, req KeySearchRequest) ([]int64, int) {
	t.Helper()
	var all []int64
	for pages := 1; pages <= 10_000; pages++ {
		p, err := r.SearchKey(t.Context(), req)
		noErr(t, err)
		if len(p.Messages) > max(req.Max, 1) {
			t.Fatalf("page %d: %d messages, over Max %d", pages, len(p.Messages), req.Max)
		}
		for _, m := range p.Messages {
			all = append(all, m.PhysicalOffset)
		}
		if p.Done {
			return all, pages
		}
		if p.Next == req.After {
			t.Fatalf("page %d: the cursor did not move from %+v", pages, req.After)
		}
		req.After = p.Next
	}
	t.Fatal("no end after 10,000 pages")
	return nil, 0
}

// TestSearchKeyPastTheCap: 200 messages of one key stored within one second, each with the key
// both as its UNIQ_KEY and in KEYS (two index entries each), among messages of another topic
// with the same key. Query stops at 64; the search pages through all 200, each once, newest
// first, whatever the page size.
func TestSearchKeyPastTheCap(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", geometry{segment: 1 << 20, units: 1000, index: &indexfile.Geometry{Slots: 64, Entries: 150}})
	t0 := s.clock
	var want []int64
	for i := range 200 {
		want = append(want, s.put(msg{keys: "order-1", uniq: "order-1", body: body(i), ts: t0 + int64(i)}))
		s.put(msg{topic: "Other", keys: "order-1", body: body(i), ts: t0 + int64(i)})
	}
	slices.Reverse(want)
	if n := len(s.index.Files()); n < 4 {
		t.Fatalf("%d index files: the test should cross several", n)
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "order-1", Max: 1000}); len(got) > MaxQueryMessages {
		t.Fatalf("Query found %d, over its cap %d", len(got), MaxQueryMessages)
	}
	for _, size := range []int{1, 7, 50, 1000} {
		got, pages := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "order-1", Max: size})
		if !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %d messages (first %v), want the 200 newest first", size, len(got), got[:min(len(got), 6)])
		}
		if size == 7 && pages < 200/7 {
			t.Fatalf("%d pages of 7", pages)
		}
	}
	// UniqOnly: the same, the key being the UNIQ_KEY of each; a KEYS-only key is not found.
	got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "order-1", UniqOnly: true, Max: 30})
	if !slices.Equal(got, want) {
		t.Fatalf("by UNIQ_KEY: %d messages", len(got))
	}
	if got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "Other", Key: "order-1", UniqOnly: true, Max: 30}); len(got) != 0 {
		t.Fatalf("a KEYS-only key by UNIQ_KEY: %d messages", len(got))
	}
}

// TestSearchKeyFilters: a time window (the index's seconds) and a subject pattern narrow the
// pages; hash collisions never leak; the errors are the Query's.
func TestSearchKeyFilters(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	t0 := s.clock
	var eu, all []int64
	for i := range 12 {
		subject := fmt.Sprintf("orders.us.%d", i)
		if i%3 == 0 {
			subject = fmt.Sprintf("orders.eu.%d", i)
		}
		p := s.put(msg{keys: "Aa", props: [][2]string{{"NATS_SUBJECT", subject}}, ts: t0 + 1000*int64(i)})
		s.put(msg{keys: "BB", ts: t0 + 1000*int64(i)}) // the same index hash
		all = append([]int64{p}, all...)
		if i%3 == 0 {
			eu = append([]int64{p}, eu...)
		}
	}
	if got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "Aa", Max: 2}); !slices.Equal(got, all) {
		t.Fatalf("all: %v, want %v", got, all)
	}
	if got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "Aa", Subject: "orders.eu.>", Max: 2}); !slices.Equal(got, eu) {
		t.Fatalf("subject orders.eu.>: %v, want %v", got, eu)
	}
	// The index's time of an entry (whole seconds from its file's begin) decides, as for Query.
	window := query(t, s.r, QueryRequest{Topic: "T", Key: "Aa", Begin: t0 + 2000, End: t0 + 5000})
	if len(window) < 3 || len(window) == len(all) {
		t.Fatalf("Query finds %v in seconds 2..5", window)
	}
	if got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "Aa", Begin: t0 + 2000, End: t0 + 5000, Max: 3}); !slices.Equal(got, window) {
		t.Fatalf("seconds 2..5: %v, want %v", got, window)
	}
	// A step budget of 1: pages may be empty, and still reach everything.
	if got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "Aa", Max: 5, MaxSteps: 1}); !slices.Equal(got, all) {
		t.Fatalf("one step a page: %v, want %v", got, all)
	}
	for _, req := range []KeySearchRequest{{Key: "k"}, {Topic: "T"}, {Topic: "T", Key: "k", Subject: "a..b"}} {
		if _, err := s.r.SearchKey(t.Context(), req); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	noIndex := New(s.log, s.cq, nil, nil, storeHost)
	if _, err := noIndex.SearchKey(t.Context(), KeySearchRequest{Topic: "T", Key: "k"}); !errors.Is(err, ErrIndexDisabled) {
		t.Fatalf("no index: %v", err)
	}
}

// TestSearchKeyFirstRecord: the record at CommitLog offset 0, the newest of its key, is found
// (the cursor's "last offset returned" starts at none, not at 0).
func TestSearchKeyFirstRecord(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	if p := s.put(msg{keys: "first", body: body(0)}); p != 0 {
		t.Fatalf("the first record is at %d", p)
	}
	s.put(msg{keys: "other", body: body(1)})
	if got, _ := searchAll(t, s.r, KeySearchRequest{Topic: "T", Key: "first", Max: 10}); len(got) != 1 || got[0] != 0 {
		t.Fatalf("key of the record at offset 0: %v", got)
	}
}
