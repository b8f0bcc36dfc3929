package benchmarks

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
)

// storeBodies stores bodies with the engine over three topics, closes it and returns the run
// directory.
func storeBodies(t *testing.T, bodies [][]byte) string {
	t.Helper()
	dir := t.TempDir()
	e, err := engine.Open(engine.Options{
		Dir: storeDir(dir), Logger: zerolog.Nop(), CommitLogFileSize: testSegment,
		ConsumeQueueUnits: 1000, IndexSlots: 1024, IndexEntries: 4096,
	})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []engine.Message
	for i, b := range bodies {
		msgs = append(msgs, engine.Message{Topic: []string{"bench_t0", "bench_t1", "bench_t2"}[i%3], QueueID: int32(i % 4), Body: b})
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
	return dir
}

// dropLoad is what dropSent's two publishers sent: message i of publisher p has p's filler.
const dropBody = 100

// dropSent makes what two publishers sent, n messages each, and the bodies a store would hold
// if every message i with drop(p, i) had been dropped on the way: the tally and counts sent,
// the bodies kept, the number dropped.
func dropSent(n int64, drop func(p int, i int64) bool) (sent Tally, sentBy []int64, kept [][]byte, dropped int64) {
	for p := range 2 {
		for i := range n {
			b := newBody(dropBody, p)
			setSeq(b, seqOf(p, i))
			sent.Add(b)
			if drop(p, i) {
				dropped++
			} else {
				kept = append(kept, b)
			}
		}
		sentBy = append(sentBy, n)
	}
	return sent, sentBy, kept, dropped
}

func dropInput(dir string, sent Tally, sentBy []int64, dropped int64, preloaded Tally) VerifyInput {
	return VerifyInput{
		Run: Run{TolerateDrops: true, Load: Load{Publishers: 2, BodySize: dropBody, Topics: 3, Ack: FireAndForget},
			Target: TargetOptions{CommitLogSize: testSegment}},
		Dir: dir, Sent: sent, SentBy: sentBy,
		Target: TargetReport{Engine: &EngineReport{Dropped: dropped}, Dropped: dropped, Preloaded: preloaded},
	}
}

// TestVerifyWithDrops checks the verification of a run that tolerates drops against real stores:
// valid when the store holds exactly the messages sent less the ones the engine says it
// dropped, each once (whichever they were), with the target's preloaded messages apart; invalid
// when one more or one fewer was dropped than it says, or a message is held twice, was never
// sent, or is altered.
func TestVerifyWithDrops(t *testing.T) {
	// Every seventh message of publisher 1 and a run of publisher 0's are lost on the way.
	drop := func(p int, i int64) bool { return (p == 1 && i%7 == 3) || (p == 0 && i >= 200 && i < 260) }
	sent, sentBy, kept, dropped := dropSent(1000, drop)
	pre := newBody(preloadBodySize, preloadPub)
	setSeq(pre, seqOf(preloadPub, 0))
	var preloaded Tally
	preloaded.Add(pre)
	dir := storeBodies(t, append([][]byte{pre}, kept...))

	found, p := verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped, preloaded))
	if len(p) != 0 {
		t.Fatalf("sent less dropped, exactly: %v", p)
	}
	if found.Count != sent.Count-dropped || found.Count != int64(len(kept)) {
		t.Errorf("found %d, sent %d less %d dropped", found.Count, sent.Count, dropped)
	}

	_, p = verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped-1, preloaded))
	wantProblem(t, p, "1 lost without being counted as dropped")
	_, p = verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped+1, preloaded))
	wantProblem(t, p, "1 more than that")
	_, p = verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped, Tally{}))
	wantProblem(t, p, "the preloaded messages")

	// Without tolerance, the same drops make the run invalid.
	in := dropInput(dir, sent, sentBy, dropped, preloaded)
	in.Run.TolerateDrops = false
	_, p = verifyEngineStore(context.Background(), in)
	wantProblem(t, p, "dropped")

	t.Run("held twice", func(t *testing.T) {
		sent, sentBy, kept, dropped := dropSent(300, func(p int, i int64) bool { return p == 0 && i == 5 })
		// Message 9 of publisher 1 twice, standing in for the dropped one: the count is right.
		dir := storeBodies(t, append(kept, kept[len(kept)-300+9]))
		_, p := verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped, Tally{}))
		wantProblem(t, p, "1 duplicates")
		wantProblem(t, p, "message 9 of publisher 1 stored again")
	})
	t.Run("never sent", func(t *testing.T) {
		sent, sentBy, kept, dropped := dropSent(300, func(p int, i int64) bool { return p == 1 && i == 0 })
		extra := newBody(dropBody, 1)
		setSeq(extra, seqOf(1, 300)) // publisher 1 sent 0 to 299
		dir := storeBodies(t, append(kept, extra))
		_, p := verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped, Tally{}))
		wantProblem(t, p, "message 300 of publisher 1, which was never sent")
	})
	t.Run("altered", func(t *testing.T) {
		sent, sentBy, kept, dropped := dropSent(300, func(p int, i int64) bool { return i == 17 })
		kept[40][50] ^= 1
		dir := storeBodies(t, kept)
		_, p := verifyEngineStore(context.Background(), dropInput(dir, sent, sentBy, dropped, Tally{}))
		wantProblem(t, p, "altered")
		if all := strings.Join(p, "; "); !strings.Contains(all, "1 altered") {
			t.Errorf("problems %q", all)
		}
	})
}
