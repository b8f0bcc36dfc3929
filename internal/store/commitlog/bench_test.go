package commitlog

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// benchMessage is a typical message: a Java client's properties and a body of n bytes.
func benchMessage(n int) Message {
	m := baseMessage()
	m.Body = make([]byte, n)
	for i := range m.Body {
		m.Body[i] = byte(i)
	}
	m.Properties = AppendProperties(nil, JavaHashMapOrder([]Property{
		{PropKeys, "OrderID188"}, {PropTags, "TagA"}, {PropWait, "true"},
		{PropUniqKey, "7F00000112340A0B0C0D000000640001"}, {PropCluster, "DefaultCluster"},
	}))
	return m
}

var benchSizes = []int{128, 1024}

func BenchmarkAppendRecord(b *testing.B) {
	for _, n := range benchSizes {
		for _, propCRC := range []bool{false, true} {
			b.Run(fmt.Sprintf("body=%d/propCRC=%v", n, propCRC), func(b *testing.B) {
				m := benchMessage(n)
				opt := EncodeOptions{PropCRC: propCRC}
				dst, _ := AppendRecord(nil, &m, opt)
				b.SetBytes(int64(len(dst)))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if dst, err = AppendRecord(dst[:0], &m, opt); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkStampCopy is the single writer's share of an append: copy a pre-encoded record into the
// mapped segment (here a preallocated 64 MiB buffer) and stamp it there.
func BenchmarkStampCopy(b *testing.B) {
	for _, n := range benchSizes {
		for _, propCRC := range []bool{false, true} {
			b.Run(fmt.Sprintf("body=%d/propCRC=%v", n, propCRC), func(b *testing.B) {
				m := benchMessage(n)
				rec, _ := AppendRecord(nil, &m, EncodeOptions{PropCRC: propCRC})
				seg := make([]byte, 64<<20)
				pos, qo := 0, int64(0)
				b.SetBytes(int64(len(rec)))
				b.ReportAllocs()
				for b.Loop() {
					if !Fits(len(rec), len(seg)-pos) {
						pos = 0
					}
					copy(seg[pos:], rec)
					Stamp(seg[pos:], qo, int64(pos), 1700000000123, propCRC)
					pos += len(rec)
					qo++
				}
			})
		}
	}
}

// BenchmarkScan measures recovery's scan over a 64 MiB segment of records with 1 KiB bodies, CRCs
// checked.
func BenchmarkScan(b *testing.B) {
	for _, propCRC := range []bool{false, true} {
		b.Run(fmt.Sprintf("body=1024/propCRC=%v", propCRC), func(b *testing.B) {
			seg := make([]byte, 64<<20)
			m := benchMessage(1024)
			rec, _ := AppendRecord(nil, &m, EncodeOptions{PropCRC: propCRC})
			pos, count := 0, 0
			for Fits(len(rec), len(seg)-pos) {
				copy(seg[pos:], rec)
				Stamp(seg[pos:], int64(count), int64(pos), 1700000000123, propCRC)
				pos += len(rec)
				count++
			}
			Blank(seg[pos:], len(seg)-pos)
			chk := Check{RequirePropCRC: propCRC}
			b.SetBytes(int64(len(seg)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				end, tail, err := Scan(seg, 0, chk, func(int, View) error { n++; return nil })
				if err != nil || tail != TailBlank || end != pos || n != count {
					b.Fatalf("Scan = %d, %v, %v, %d records", end, tail, err, n)
				}
			}
		})
	}
}

// BenchmarkZeroTail measures the clean-end check over a never-written 64 MiB tail.
func BenchmarkZeroTail(b *testing.B) {
	seg := make([]byte, 64<<20)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, tail, _ := Scan(seg, 0, Check{}, nil); tail != TailClean {
			b.Fatal(tail)
		}
	}
}

func BenchmarkDispatchFields(b *testing.B) {
	m := benchMessage(128)
	rec, _ := AppendRecord(nil, &m, EncodeOptions{})
	Stamp(rec, 1, 2, 3, false)
	v, _ := Parse(rec)
	id := make([]byte, 0, OffsetMsgIDLenV6)
	b.ReportAllocs()
	for b.Loop() {
		_ = v.Properties().DispatchProps()
		_, _ = v.UniqKey()
		it := v.Keys()
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		id = v.AppendOffsetMsgID(id[:0])
	}
}

func BenchmarkUniqKey(b *testing.B) {
	g := NewUniqKeyGen(netip.MustParseAddr("10.0.0.1"), 1, 2, time.Now)
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = g.Append(dst[:0])
	}
}

// BenchmarkCheckCRC is what a read's CRC check costs per record (View.CheckCRC): the
// whole-record CRC where the record has one, else the body CRC.
func BenchmarkCheckCRC(b *testing.B) {
	for _, n := range benchSizes {
		for _, propCRC := range []bool{false, true} {
			b.Run(fmt.Sprintf("body=%d/propCRC=%v", n, propCRC), func(b *testing.B) {
				m := benchMessage(n)
				rec, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: propCRC})
				if err != nil {
					b.Fatal(err)
				}
				Stamp(rec, 1, 4096, 1_700_000_000_000, propCRC)
				v, err := Parse(rec)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(rec)))
				for b.Loop() {
					if err := v.CheckCRC(propCRC); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
