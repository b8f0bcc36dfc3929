package stages

import "testing"

// TestArenaReferences: a batch's ReleaseBytes drops its references and clears the records'
// Bytes; the buffer goes back only with the last reference, and one release too many panics
// rather than hand the buffer to two writers.
func TestArenaReferences(t *testing.T) {
	a := NewArena()
	a.Buf = append(a.Buf, "record one|record two"...)
	a.Hold()
	b := &Batch{Records: []Record{{Bytes: a.Buf[:10]}, {Bytes: a.Buf[11:]}}, Arenas: []*Arena{a}}
	b.ReleaseBytes()
	if b.Records[0].Bytes != nil || b.Records[1].Bytes != nil || b.Arenas != nil {
		t.Fatalf("after ReleaseBytes: %+v", b)
	}
	if n := a.refs.Load(); n != 1 {
		t.Fatalf("%d references left, want the encoder's", n)
	}
	own := &Batch{Records: []Record{{Bytes: []byte("own")}}}
	own.ReleaseBytes()
	if string(own.Records[0].Bytes) != "own" {
		t.Fatal("a batch without arenas lost its records' bytes")
	}
	a.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("a release past the last reference did not panic")
		}
	}()
	a.Release()
}
