package ingress

import (
	"fmt"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// TestUntrackedRefusalReleasesClaim: a batch that finds the tracker's queue full is not
// tracked; a sequence refused in it must still have its claim released, or its retry would be
// dropped as a copy of a message on its way, for ever. A stored sequence keeps its claim.
func TestUntrackedRefusalReleasesClaim(t *testing.T) {
	srv := runServer(t, 0)
	in, err := New(Config{Conn: connect(t, srv), Out: make(chan *stages.Batch, 1), StoreHost: testStoreHost,
		Batched: &batched.Config{Queue: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// The tracker is not running: its queue of one batch stays full after the first offer.
	set := in.tracker.Claims("S")
	for seq := uint64(1); seq <= 3; seq++ {
		if first, _ := set.Claim(seq, 0); !first {
			t.Fatalf("seq %d claimed before", seq)
		}
	}
	refused := fmt.Errorf("%w: too large", commitlog.ErrBodyTooLarge)
	batch := func(recs ...stages.Record) *stages.Batch { return &stages.Batch{Records: recs} }
	meta := func(seq uint64) *batched.Meta {
		return &batched.Meta{SeqHeader: wire.SeqHeader{Stream: "S", Seq: seq}, AckTo: "ack"}
	}
	in.tracker.Offer(batch(stages.Record{Err: refused, Ctx: meta(1)}))
	in.tracker.Offer(batch(stages.Record{Err: refused, Ctx: meta(2)}, stages.Record{Ctx: meta(3)}))
	if st := in.Stats().Batched; st.Overflow != 1 {
		t.Fatalf("overflow %d, want 1", st.Overflow)
	}
	if first, _ := set.Claim(2, 0); !first {
		t.Fatal("seq 2, refused in an untracked batch, is still claimed: its retry would be dropped")
	}
	if first, _ := set.Claim(3, 0); first {
		t.Fatal("seq 3, stored in an untracked batch, lost its claim")
	}
	if first, _ := set.Claim(1, 0); first {
		t.Fatal("seq 1, whose batch the tracker holds, lost its claim before the tracker handled it")
	}
}
