package derive

import (
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/javahash"
)

func TestTagsCode(t *testing.T) {
	const ts = 1700000000000
	tagA := int64(javahash.String("TagA"))
	sched := commitlog.ScheduleTopic
	cases := []struct {
		p      Props
		levels DelayLevels
		want   int64
	}{
		{Props{Topic: "T"}, nil, 0},
		{Props{Topic: "T", Tags: "TagA"}, nil, tagA},
		{Props{Topic: "T", Tags: "polygenelubricants"}, nil, -2147483648}, // sign-extended
		{Props{Topic: "T", Tags: "TagA", Delay: "3"}, nil, tagA},          // not the schedule topic
		{Props{Topic: sched, Tags: "TagA", Delay: "3"}, nil, ts + 10000},
		{Props{Topic: sched, Delay: "1"}, nil, ts + 1000},
		{Props{Topic: sched, Delay: "18"}, nil, ts + 7200000},
		{Props{Topic: sched, Delay: "99"}, nil, ts + 7200000}, // clamped to the last level
		{Props{Topic: sched, Delay: "+2"}, nil, ts + 5000},
		{Props{Topic: sched, Tags: "TagA", Delay: "0"}, nil, tagA},
		{Props{Topic: sched, Tags: "TagA", Delay: "-1"}, nil, tagA},
		{Props{Topic: sched, Tags: "TagA", Delay: "x"}, nil, tagA},
		{Props{Topic: sched, Tags: "TagA", Delay: "99999999999"}, nil, tagA},
		{Props{Topic: sched, Delay: "2"}, DelayLevels{7, 11}, ts + 11},
		{Props{Topic: sched, Tags: "TagA", Delay: "2"}, DelayLevels{}, tagA},
	}
	for _, c := range cases {
		v := parse(t, encode(t, c.p, 0, commitlog.TxNotType, 0, 0, ts))
		if got := TagsCode(PropsOf(v), v.StoreTimestamp(), c.levels); got != c.want {
			t.Errorf("%+v %v: tags code %d, want %d", c.p, c.levels, got, c.want)
		}
	}
}

// TestQueuedAndIndexed: as RocketMQ, normal and committed messages get a ConsumeQueue unit, and
// all but rolled-back ones get index entries.
func TestQueuedAndIndexed(t *testing.T) {
	for _, c := range []struct {
		tx              int32
		queued, indexed bool
	}{
		{commitlog.TxNotType, true, true},
		{commitlog.TxPrepared, false, true},
		{commitlog.TxCommit, true, true},
		{commitlog.TxRollback, false, false},
	} {
		if Queued(c.tx) != c.queued || Indexed(c.tx) != c.indexed {
			t.Errorf("tx %#x: queued %v indexed %v, want %v %v", c.tx, Queued(c.tx), Indexed(c.tx), c.queued, c.indexed)
		}
	}
}
