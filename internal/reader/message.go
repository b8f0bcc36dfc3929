package reader

import (
	"net/netip"
	"unsafe"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// Message is one stored message as a reader returns it.
//
// Every string and Body are views of one private copy of the record, made when the record
// was read: they stay valid as long as the Message is reachable, and the copy is never
// written again. Body's capacity ends with the body, so appending to it copies.
type Message struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	// Size is the whole record's size (TOTALSIZE), what MaxBytes counts.
	Size int32
	// MsgID is the offset message id: store host and physical offset, uppercase hex.
	MsgID          string
	StoreTimestamp int64 // broker clock, ms
	BornTimestamp  int64 // producer clock, ms
	BornHost       netip.AddrPort
	StoreHost      netip.AddrPort
	Flag           int32
	SysFlag        int32
	ReconsumeTimes int32
	// Tags, Keys (space-separated, as stored) and UniqKey are the TAGS, KEYS and UNIQ_KEY
	// properties, "" when absent.
	Tags    string
	Keys    string
	UniqKey string
	// Properties holds every property of the record; a repeated name keeps its last value.
	// It is nil when the request asked for no map (GetRequest.NoPropertyMap).
	Properties map[string]string
	// RawProperties is the properties string as stored: name 0x01 value 0x02, repeated
	// (commitlog.Properties reads it).
	RawProperties []byte
	Body          []byte
}

// buffer hands out pieces of larger allocations, so that the records of one result are
// copied into one or a few buffers instead of one each.
type buffer struct {
	free []byte
}

// take returns n bytes, from the current buffer when it has room, else from a new one of
// max(n, hint) bytes.
func (b *buffer) take(n, hint int) []byte {
	if cap(b.free)-len(b.free) < n {
		b.free = make([]byte, 0, max(n, hint))
	}
	p := b.free[len(b.free) : len(b.free)+n : len(b.free)+n]
	b.free = b.free[:len(b.free)+n]
	return p
}

// msgIDRoom is what a record's copy reserves for its message id.
const msgIDRoom = commitlog.OffsetMsgIDLenV6

// decode copies the record v (read at phys) into buf and returns the Message over the copy,
// with its Properties map when withMap. host names the message id; an invalid one uses the
// record's STOREHOST.
func decode(v commitlog.View, phys int64, host netip.AddrPort, buf *buffer, hint int, withMap bool) Message {
	var m Message
	decodeInto(&m, v, phys, host, buf, hint, withMap)
	return m
}

// decodeInto is decode into *m, which must be zero: Messages are large, and a Get fills them
// in place in its result.
func decodeInto(m *Message, v commitlog.View, phys int64, host netip.AddrPort, buf *buffer, hint int, withMap bool) {
	n := v.TotalSize()
	rec := buf.take(n+msgIDRoom, hint)
	copy(rec, v.Bytes())
	var id []byte
	if host.IsValid() {
		id = commitlog.AppendOffsetMsgID(rec[n:n], host, phys)
	} else {
		id = v.AppendOffsetMsgID(rec[n:n])
	}
	c, err := commitlog.Parse(rec[:n])
	if err != nil {
		panic("reader: a record's copy does not parse: " + err.Error()) // v parsed: impossible
	}
	m.Topic = str(c.Topic())
	m.QueueID = c.QueueID()
	m.QueueOffset = c.QueueOffset()
	m.PhysicalOffset = c.PhysicalOffset()
	m.Size = int32(n)
	m.MsgID = str(id)
	m.StoreTimestamp = c.StoreTimestamp()
	m.BornTimestamp = c.BornTimestamp()
	m.BornHost = c.BornHost()
	m.StoreHost = c.StoreHost()
	m.Flag = c.Flag()
	m.SysFlag = c.SysFlag()
	m.ReconsumeTimes = c.ReconsumeTimes()
	body := c.Body()
	m.Body = body[:len(body):len(body)]
	props := c.Properties()
	m.RawProperties = props[:len(props):len(props)]
	if withMap {
		m.Properties = make(map[string]string, countProps(props))
	}
	it := props.Iter()
	for {
		name, value, ok := it.Next()
		if !ok {
			return
		}
		n, v := str(name), str(value)
		if m.Properties != nil {
			m.Properties[n] = v
		}
		switch n { // the last one wins, as in the map
		case commitlog.PropTags:
			m.Tags = v
		case commitlog.PropKeys:
			m.Keys = v
		case commitlog.PropUniqKey:
			m.UniqKey = v
		}
	}
}

// countProps is the number of entries props can hold (its 0x02 separators), a size hint.
func countProps(props []byte) int {
	n := 0
	for _, c := range props {
		if c == commitlog.PropertySeparator {
			n++
		}
	}
	return n
}

// str views b as a string. Only for bytes of a record's copy, which nothing writes again.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
