package verify

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/vfs"
)

// The store the checkpoints of the RocketMQ fixtures' checkpoint/ (internal/rmqfixture) describe (see the
// README of the copies in internal/store/checkpoint/testdata).
const (
	fixtureEnd        = 29429172
	fixtureLastRecord = 29428371
	fixtureTimestamp  = 1796156530133
	fixtureSegment    = 32 << 20
)

// fixtureStore writes through the engine a store whose records end where the fixture
// checkpoints say, the last one starting at RocketMQ's confirm offset, all stored at their
// timestamp.
func checkpointFixtureStore(t *testing.T) *vfs.Mem {
	t.Helper()
	fsys := vfs.NewMem()
	opts := engineOptions(t, fsys, testDir)
	opts.CommitLogFileSize = fixtureSegment
	opts.Now = func() time.Time { return time.UnixMilli(fixtureTimestamp) }
	e, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	put := func(i int, n int64) {
		t.Helper()
		r, err := e.Put(context.Background(), engine.Message{Topic: "fixture", Body: make([]byte, n),
			Keys: []string{fmt.Sprintf("k%06d", i)}, MsgID: fmt.Sprintf("m%06d", i)})
		if err != nil || r[0].Err != nil {
			t.Fatal(err, r[0].Err)
		}
	}
	put(0, 0)
	overhead := e.Offsets().Written
	for i := 1; e.Offsets().Written < fixtureLastRecord; i++ {
		put(i, min(fixtureLastRecord-e.Offsets().Written-overhead, 1<<20))
	}
	put(-1, fixtureEnd-fixtureLastRecord-overhead)
	if got := e.Offsets().Written; got != fixtureEnd {
		t.Fatalf("store ends at %d, want %d", got, fixtureEnd)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys
}

// TestRocketMQFixtureCheckpointsVerify puts each fixture checkpoint, byte for byte, on the
// store it describes: both verify clean, the one RocketMQ rewrote with a note saying so (before,
// it was "cannot be decoded", a problem, and verify exited 1). So does the RocketMQ one with an
// earlier physicMsgTimestamp, as a RocketMQ that stored messages of its own would leave it: the
// older extension can then no longer be checked, and is noted as ignored.
func TestRocketMQFixtureCheckpointsVerify(t *testing.T) {
	fsys := checkpointFixtureStore(t)
	for _, name := range []string{"engine-written", "after-rocketmq", "after-rocketmq with traffic"} {
		page, err := os.ReadFile(path.Join("..", "store", "checkpoint", "testdata", "rocketmq-5.3.3", strings.Fields(name)[0]))
		if err != nil {
			t.Fatal(err)
		}
		want := "RocketMQ rewrote the checkpoint"
		if strings.HasSuffix(name, "traffic") {
			binary.BigEndian.PutUint64(page, fixtureTimestamp-1000)
			want = "version-1 extension no longer matches"
		}
		f, err := fsys.Create(path.Join(testDir, checkpoint.FileName))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(page); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		opts := options(fsys, testDir)
		opts.CommitLogFileSize = fixtureSegment
		r, err := Verify(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		requireClean(t, r)
		c := r.Checkpoint
		ext := want != "version-1 extension no longer matches"
		if !c.Present || c.Extension != ext || (ext && (c.DurableOffset != fixtureEnd || c.DispatchedOffset != fixtureEnd)) {
			t.Fatalf("%s: checkpoint report %+v", name, c)
		}
		noted := strings.Contains(strings.Join(r.Notes, "\n"), want)
		if noted != (name != "engine-written") {
			t.Fatalf("%s: notes %q", name, r.Notes)
		}
	}
}
