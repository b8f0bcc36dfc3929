package checkpoint

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// savePages saves cpOld and then, in place, cpMid (so that the file is in the steady state of a
// running engine, with a backup slot), and returns the file's bytes before Save(cpNew), after
// its first write (the slot) and after it returns.
func savePages(t *testing.T) (old, mid, cur []byte) {
	t.Helper()
	m := memWithDir(t, "store")
	path := "store/" + FileName
	for _, c := range []Checkpoint{cpOld, cpMid} {
		if err := Save(m, path, c); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []byte {
		b, err := m.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	old = read()
	writes := 0
	f := vfs.NewFaulty(m, func(op vfs.Op, _ string) error {
		if op == vfs.OpWrite {
			if writes++; writes == 2 {
				mid = read()
			}
		}
		return nil
	})
	if err := Save(f, path, cpNew); err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Fatalf("Save wrote %d times, want 2", writes)
	}
	return old, mid, read()
}

var cpMid = Checkpoint{
	PhysicMsgTimestamp: 1700000003000, LogicsMsgTimestamp: 1700000002000, IndexMsgTimestamp: 1699999999000,
	Ext: Ext{Valid: true, DurableOffset: 3 << 19, DispatchedOffset: 3<<19 - 100},
}

// tears returns what a power cut while the disk turned page a into page b could leave on it:
// cut at every byte, front to back and back to front; every mix of 512-byte sectors; random
// mixes byte by byte; and garbage in random bytes of those that differ (a device tearing the
// sector it was writing). Bytes equal in a and b are never changed: they were on disk already.
func tears(a, b []byte, rng *rand.Rand) [][]byte {
	var out [][]byte
	mix := func(pick func(i int) bool) {
		img := bytes.Clone(a)
		for i := range img {
			if pick(i) {
				img[i] = b[i]
			}
		}
		out = append(out, img)
	}
	for cut := 0; cut <= len(a); cut++ {
		mix(func(i int) bool { return i < cut })
		mix(func(i int) bool { return i >= cut })
	}
	for mask := range 1 << (Size / 512) {
		mix(func(i int) bool { return mask&(1<<(i/512)) != 0 })
	}
	for range 2000 {
		mix(func(int) bool { return rng.IntN(2) == 0 })
	}
	for range 500 {
		img := bytes.Clone(a)
		for i := range img {
			if a[i] != b[i] && rng.IntN(3) == 0 {
				img[i] = byte(rng.Uint32())
			}
		}
		out = append(out, img)
	}
	return out
}

// TestSaveTornAtEveryByte tears each of Save's two in-place writes in every way tears makes and
// decodes what is left: it is always the checkpoint before (cpMid) or the one being saved
// (cpNew), whole; or, only when the tear went through RocketMQ's 40 bytes so that they are
// neither the old nor the new ones, one of the two extensions marked Rewritten, which recovery
// takes as a lower bound. A tear of the first write (the slot) never needs even that.
func TestSaveTornAtEveryByte(t *testing.T) {
	old, mid, cur := savePages(t)
	heads := [][]byte{Encode(cpMid)[:rocketMQLen], Encode(cpNew)[:rocketMQLen]}
	rng := rand.New(rand.NewPCG(1, 2))
	for step, pair := range [][2][]byte{{old, mid}, {mid, cur}} {
		exact, rewritten := 0, 0
		for i, img := range tears(pair[0], pair[1], rng) {
			c, err := DecodeFile(img)
			if err != nil {
				t.Fatalf("write %d, image %d: %v", step+1, i, err)
			}
			if c == cpMid || c == cpNew {
				exact++
				continue
			}
			ext := c.Ext
			ext.Rewritten = false
			head := img[:rocketMQLen]
			switch {
			case step == 0:
				t.Fatalf("write 1 (the slot), image %d: %+v, want cpMid or cpNew whole", i, c)
			case !c.Ext.Rewritten || (ext != cpMid.Ext && ext != cpNew.Ext):
				t.Fatalf("write 2, image %d: torn checkpoint %+v", i, c)
			case bytes.Equal(head, heads[0]) || bytes.Equal(head, heads[1]):
				t.Fatalf("write 2, image %d: Rewritten (%+v) although RocketMQ's bytes are whole: %x", i, c, head)
			}
			rewritten++
		}
		t.Logf("write %d: %d images whole, %d with torn RocketMQ bytes taken as Rewritten", step+1, exact, rewritten)
	}
}

// TestDecodeFileAfterRocketMQ: RocketMQ rewrites its 40 bytes and keeps the rest of the page, so
// the extension the engine saved last is read as Rewritten, both after a complete save and after
// a save cut short between its two writes (the slot's extension is then the newer one).
func TestDecodeFileAfterRocketMQ(t *testing.T) {
	_, mid, cur := savePages(t)
	rmq := Encode(Checkpoint{PhysicMsgTimestamp: 1700000009999, LogicsMsgTimestamp: 1700000009999, ConfirmPhyOffset: 5 << 20})
	for name, page := range map[string][]byte{"complete": cur, "cut between the writes": mid} {
		img := bytes.Clone(page)
		copy(img, rmq[:rocketMQLen])
		c, err := DecodeFile(img)
		want := cpNew.Ext
		want.Rewritten = true
		if err != nil || c.Ext != want || c.PhysicMsgTimestamp != 1700000009999 || c.ConfirmPhyOffset != 5<<20 {
			t.Fatalf("%s: %+v, %v; want RocketMQ's fields and %+v", name, c, err, want)
		}
		if d, err := Decode(img); name == "complete" && (err != nil || d != c) {
			t.Fatalf("%s: Decode %+v, %v; DecodeFile %+v", name, d, err, c)
		}
	}
}

// TestDecodeFileWithoutSlot: a file without an intact slot (written by RocketMQ, by an engine
// before the slot, or with the slot damaged) decodes as Decode decodes it.
func TestDecodeFileWithoutSlot(t *testing.T) {
	_, _, cur := savePages(t)
	damaged := bytes.Clone(cur)
	damaged[backupNextOff+50] ^= 1
	for name, b := range map[string][]byte{
		"rocketmq":        Encode(Checkpoint{PhysicMsgTimestamp: 5}),
		"older engine":    Encode(cpNew),
		"damaged slot":    damaged,
		"short":           cur[:backupEnd-1],
		"rocketmq 24":     Encode(Checkpoint{PhysicMsgTimestamp: 5})[:24],
		"corrupt no slot": append(bytes.Clone(Encode(cpNew)[:extOff]), 'x'),
	} {
		c1, err1 := Decode(b)
		c2, err2 := DecodeFile(b)
		if c1 != c2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s: DecodeFile %+v, %v; Decode %+v, %v", name, c2, err2, c1, err1)
		}
	}
	// A damaged first half with an intact slot is the slot's checkpoint.
	bad := bytes.Clone(cur)
	bad[extOff+10] ^= 1
	if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode of a damaged extension: %v", err)
	}
	if c, err := DecodeFile(bad); err != nil || c != cpNew {
		t.Fatalf("DecodeFile of a damaged extension with its slot: %+v, %v", c, err)
	}
}
