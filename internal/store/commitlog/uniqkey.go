package commitlog

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"time"
)

// UniqKeyGen generates UNIQ_KEY values (client message ids) the way RocketMQ's
// MessageClientIDSetter.createUniqID does, for messages that arrive without one:
//
//	client IP (4 bytes, or 16 for IPv6) | pid (short) | salt (int) | ms since the start of the
//	current month (int) | counter (short)
//
// as uppercase hex: 32 chars for an IPv4 client. Java puts the class loader's hash code where the
// salt is; the caller passes a random int instead. The month starts in the clock's location (local
// time for time.Now), as Java's Calendar does.
//
// A UniqKeyGen is safe for concurrent use: the counter and the month window are atomics, so
// parallel ingress workers share one generator without a lock.
type UniqKeyGen struct {
	prefix    [2 * (16 + 2 + 4)]byte // hex of IP, pid and salt
	prefixLen int
	now       func() time.Time
	window    atomic.Pointer[monthWindow]
	counter   atomic.Uint32
}

// monthWindow is [start, next) of the current month in Unix ms; replaced whole when a month ends so
// that readers never see a start from one month and an end from another.
type monthWindow struct {
	start, next int64
}

// NewUniqKeyGen returns a generator for a client at ip (the zero Addr stands for "unknown": like
// Java, the low 4 bytes of the current time in ms take its place), process id pid (its low 16 bits
// are used) and salt. now is the clock, time.Now if nil; tests inject a fixed one.
func NewUniqKeyGen(ip netip.Addr, pid int, salt int32, now func() time.Time) *UniqKeyGen {
	if now == nil {
		now = time.Now
	}
	g := &UniqKeyGen{now: now}
	var fixed [16 + 2 + 4]byte
	n := 0
	switch {
	case !ip.IsValid():
		binary.BigEndian.PutUint32(fixed[:], uint32(now().UnixMilli()))
		n = 4
	case IsHostV6(ip):
		a := ip.As16()
		n = copy(fixed[:], a[:])
	default:
		a := ip.Unmap().As4()
		n = copy(fixed[:], a[:])
	}
	binary.BigEndian.PutUint16(fixed[n:], uint16(pid))
	binary.BigEndian.PutUint32(fixed[n+2:], uint32(salt))
	g.prefixLen = len(appendHex(g.prefix[:0], fixed[:n+6]))
	g.window.Store(windowAt(now()))
	return g
}

func windowAt(t time.Time) *monthWindow {
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
	return &monthWindow{start: start.UnixMilli(), next: start.AddDate(0, 1, 0).UnixMilli()}
}

// StartCounter makes n the counter of the next key. A generator whose salt is fixed
// (GeneratedSalt) starts it at random, so that two processes with the same address and pid (two
// containers, each its pid 1) do not make the same keys in the same millisecond.
func (g *UniqKeyGen) StartCounter(n uint32) { g.counter.Store(n) }

// Len returns the length of the keys in hex chars: 32 for an IPv4 client, 56 for IPv6.
func (g *UniqKeyGen) Len() int { return g.prefixLen + 12 }

// Append appends a new key to dst. It allocates nothing when dst has room, except once a month when
// the month window moves.
func (g *UniqKeyGen) Append(dst []byte) []byte {
	return g.AppendAt(dst, g.now())
}

// AppendAt is Append with the time taken as t instead of read from the clock: a caller making
// keys for a batch of messages taken at one time reads the clock once (reading it per key was
// a sixth of encoding a small message).
func (g *UniqKeyGen) AppendAt(dst []byte, t time.Time) []byte {
	cur := t.UnixMilli()
	w := g.window.Load()
	if cur >= w.next {
		nw := windowAt(t)
		if !g.window.CompareAndSwap(w, nw) {
			nw = g.window.Load() // another caller moved it; use theirs
		}
		w = nw
	}
	diff := int32(cur - w.start)
	if diff < 0 && diff > -1_000_000 {
		diff = 0 // clock stepped back a little (NTP), as Java tolerates
	}
	var tail [6]byte
	binary.BigEndian.PutUint32(tail[:], uint32(diff))
	binary.BigEndian.PutUint16(tail[4:], uint16(g.counter.Add(1)-1))
	dst = append(dst, g.prefix[:g.prefixLen]...)
	return appendHex(dst, tail[:])
}

// Next returns a new key as a string.
func (g *UniqKeyGen) Next() string {
	return string(g.Append(make([]byte, 0, g.Len())))
}
