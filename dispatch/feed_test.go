package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// TestDispatchFromFeed builds two identical logs, dispatches one from the log alone and the
// other with a feed that holds only part of the records, as the live feed may: records with
// several keys and transactional ones are not in it (their index is not known ahead), one
// round is dropped (a full feed), and rolls leave blank fillers between rounds. Both must end
// with the same ConsumeQueue and IndexFile bytes.
func TestDispatchFromFeed(t *testing.T) {
	geo := indexfile.Geometry{Slots: 16, Entries: 40}
	memA, memB := vfs.NewMem(), vfs.NewMem()
	a := openStore(t, memA, "/s", 4096, 16, geo)
	b := openStore(t, memB, "/s", 4096, 16, geo)
	for i := range 120 {
		topic := []string{"A", "B", "C"}[i%3]
		tx := int32(commitlog.TxNotType)
		if i%17 == 5 {
			tx = commitlog.TxPrepared
		}
		var keys []string
		switch i % 4 {
		case 1:
			keys = []string{fmt.Sprintf("k%d", i)}
		case 2:
			keys = []string{fmt.Sprintf("k%d", i), "shared"} // two keys: read back from the log
		}
		tags := []string{"", "tagA", "tagB"}[i%3]
		body := strings.Repeat("x", 50+i%9*40)
		for _, s := range []*store{a, b} {
			s.add(topic, int32(i%2), tx, tags, fmt.Sprintf("u%d", i), keys, body)
		}
	}
	if len(a.log.Queue().Files()) < 5 {
		t.Fatalf("%d segments: the test wants rolls", len(a.log.Queue().Files()))
	}

	feed := stages.NewDispatchFeed(1 << 20)
	var round []stages.Dispatched
	rounds, fed := 0, 0
	for i, r := range a.recs {
		p := derive.Props{Topic: r.topic, Tags: r.tags, Keys: strings.Join(r.keys, " "), UniqKey: r.uniq}
		if x := derive.Ahead(p, derive.TopicPrefix(r.topic)); r.tx == commitlog.TxNotType && x.Known {
			round = append(round, stages.Dispatched{Phys: r.phys, Size: r.size, QueueID: r.queue,
				QueueOffset: r.queueOffset, StoreTimestamp: r.ts, Topic: r.topic, Index: stages.RecordIndex(x)})
		}
		if i%7 == 6 || i == len(a.recs)-1 {
			rounds++
			if rounds == 4 {
				round = round[:0] // dropped: the log has these
				continue
			}
			fed += len(round)
			feed.Offer(round)
			round = nil
		}
	}
	if fed < 40 {
		t.Fatalf("only %d records fed", fed)
	}

	end := a.log.MaxOffset()
	readA := &countingReader{Reader: a.log}
	for _, c := range []struct {
		s    *store
		log  Reader
		feed *stages.DispatchFeed
	}{{a, readA, feed}, {b, b.log, nil}} {
		d := &Dispatcher{Log: c.log, Builder: derive.NewBuilder(c.s.cq, c.s.index, nil), Limit: stages.NewWatermark(0),
			Dispatched: stages.NewWatermark(0), Feed: c.feed, MaxStep: 1000}
		done := make(chan error, 1)
		go func() { done <- d.Run(context.Background()) }()
		d.Limit.Advance(end)
		if err := d.Dispatched.Wait(context.Background(), end); err != nil {
			t.Fatal(err)
		}
		d.Limit.Fail(stages.ErrClosed)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c.s.checkQueues()
		c.s.checkIndex()
	}
	if _, ok := feed.Poll(); ok {
		t.Fatal("dispatch left rounds in the feed")
	}
	if want := len(a.recs) - fed; readA.records != want {
		t.Fatalf("%d records read from the log, want the %d the feed did not hold", readA.records, want)
	}
	if !equalQueues(snapshotQueues(t, a), snapshotQueues(t, b)) {
		t.Fatal("the ConsumeQueues differ between dispatch from the feed and from the log")
	}
	fa, fb := a.index.Files(), b.index.Files()
	if len(fa) != len(fb) || len(fa) < 2 {
		t.Fatalf("index files: %d from the feed, %d from the log (want the same, and a roll)", len(fa), len(fb))
	}
	for i := range fa {
		da, errA := memA.ReadFile(fa[i].Name())
		db, errB := memB.ReadFile(fb[i].Name())
		if errA != nil || errB != nil || len(da) == 0 {
			t.Fatalf("reading index file %d: %v, %v (%d bytes)", i, errA, errB, len(da))
		}
		if !bytes.Equal(da, db) {
			t.Fatalf("index file %d differs between dispatch from the feed and from the log", i)
		}
	}
}

// countingReader counts the records a Reader hands to dispatch.
type countingReader struct {
	Reader
	records int
}

func (r *countingReader) Each(from, limit int64, chk commitlog.Check, fn func(int64, commitlog.View) error) (int64, error) {
	return r.Reader.Each(from, limit, chk, func(phys int64, v commitlog.View) error {
		err := fn(phys, v)
		if err == nil {
			r.records++
		}
		return err
	})
}
