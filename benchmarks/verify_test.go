package benchmarks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/consumequeue"
)

const testSegment = 1 << 20

// makeStore stores n bench bodies over three topics with the engine, closes it, and returns the
// run directory and the tally of what it stored.
func makeStore(t *testing.T, n int) (string, Tally) {
	t.Helper()
	dir := t.TempDir()
	e, err := engine.Open(engine.Options{
		Dir: storeDir(dir), Logger: zerolog.Nop(), CommitLogFileSize: testSegment,
		ConsumeQueueUnits: 1000, IndexSlots: 1024, IndexEntries: 4096,
	})
	if err != nil {
		t.Fatal(err)
	}
	var sent Tally
	body := newBody(100, 0)
	var msgs []engine.Message
	for i := range n {
		setSeq(body, seqOf(0, int64(i)))
		sent.Add(body)
		msgs = append(msgs, engine.Message{Topic: []string{"bench_t0", "bench_t1", "bench_t2"}[i%3], QueueID: int32(i % 4),
			Body: append([]byte(nil), body...)})
	}
	res, err := e.Put(context.Background(), msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, sent
}

func verify(t *testing.T, dir string, sent Tally) []string {
	t.Helper()
	in := VerifyInput{Run: Run{Target: TargetOptions{CommitLogSize: testSegment}}, Dir: dir, Sent: sent,
		Target: TargetReport{Engine: &EngineReport{Records: sent.Count}}}
	found, problems := verifyEngineStore(context.Background(), in)
	if len(problems) == 0 && found != sent {
		t.Errorf("no problem reported, but found %+v, sent %+v", found, sent)
	}
	return problems
}

func wantProblem(t *testing.T, problems []string, want string) {
	t.Helper()
	if all := strings.Join(problems, "; "); !strings.Contains(all, want) {
		t.Errorf("problems %q, want one with %q", all, want)
	}
}

func TestVerifyStore(t *testing.T) {
	dir, sent := makeStore(t, 500)
	if p := verify(t, dir, sent); len(p) != 0 {
		t.Fatalf("a complete store: %v", p)
	}

	t.Run("one more sent than stored", func(t *testing.T) {
		more := sent
		body := newBody(100, 0)
		setSeq(body, seqOf(0, 500))
		more.Add(body)
		p := verify(t, dir, more)
		wantProblem(t, p, "commitlog: 1 of 501 messages missing")
		wantProblem(t, p, "consumequeues: 1 of 501 messages missing")
	})

	t.Run("engine drops", func(t *testing.T) {
		in := VerifyInput{Run: Run{Target: TargetOptions{CommitLogSize: testSegment}}, Dir: dir, Sent: sent,
			Target: TargetReport{Engine: &EngineReport{Dropped: 3}}}
		_, p := verifyEngineStore(context.Background(), in)
		wantProblem(t, p, "dropped 3 messages")
	})

	t.Run("a ConsumeQueue unit lost", func(t *testing.T) {
		dir, sent := makeStore(t, 500)
		// Zero the last unit of queue bench_t1/2: the queue then ends one record early.
		q := filepath.Join(dir, "store", "consumequeue", "bench_t1", "2")
		ents, err := os.ReadDir(q)
		if err != nil || len(ents) != 1 {
			t.Fatalf("%v %v", ents, err)
		}
		name := filepath.Join(q, ents[0].Name())
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		end := 0
		for end+consumequeue.UnitSize <= len(data) && consumequeue.DecodeUnit(data[end:]).Valid() {
			end += consumequeue.UnitSize
		}
		clear(data[end-consumequeue.UnitSize : end])
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p := verify(t, dir, sent)
		wantProblem(t, p, "consumequeues: 1 of 500 messages missing")
		if strings.Contains(strings.Join(p, ";"), "commitlog:") {
			t.Errorf("the CommitLog is intact: %v", p)
		}
	})

	t.Run("a body altered", func(t *testing.T) {
		dir, sent := makeStore(t, 500)
		name := filepath.Join(dir, "store", "commitlog", "00000000000000000000")
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		// The body of the 251st record starts with its sequence number: 250.
		i := strings.Index(string(data), string([]byte{0, 0, 0, 0, 0, 0, 0, 250}))
		if i < 0 {
			t.Fatal("record 250 not found")
		}
		data[i+20] ^= 1
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		wantProblem(t, verify(t, dir, sent), "CRC")
	})
}
