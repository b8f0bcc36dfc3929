package commitlog

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
)

// View is a zero-copy, read-only view of one record whose structure has been validated (every
// length fits TOTALSIZE), made by Parse, CheckRecord or Scan. Its accessors read the bytes in place
// and allocate nothing; the slices they return alias the record, so they are valid only as long as
// the underlying segment is mapped. The zero View holds no record; its accessors must not be called.
type View struct {
	rec    []byte // exactly TOTALSIZE bytes
	bodyAt int    // position of BODYLENGTH
	topAt  int    // position of TOPICLENGTH
	propAt int    // position of PROPERTIESLENGTH
}

// Parse validates the structure of the record at the start of b (b may run past it) without
// checking CRCs, and returns a view of it. A blank filler, a zero TOTALSIZE or any inconsistent
// length is an error wrapping ErrCorrupt. Parse never panics, whatever b holds.
func Parse(b []byte) (View, error) {
	if len(b) < PosMagic+4 {
		return View{}, corrupt(ReasonSizeRange, int64(len(b)), MinRecordLen)
	}
	magic := binary.BigEndian.Uint32(b[PosMagic:])
	ver, ok := VersionOf(magic)
	if !ok {
		return View{}, corrupt(ReasonBadMagic, int64(magic), int64(MagicV1))
	}
	return parseRecord(b, ver)
}

// parseRecord validates every length of the V1/V2 record at b[0:] against its TOTALSIZE and b.
func parseRecord(b []byte, ver Version) (View, error) {
	be := binary.BigEndian
	size := int64(int32(be.Uint32(b[PosTotalSize:])))
	if size < MinRecordLen || size > int64(len(b)) {
		return View{}, corrupt(ReasonSizeRange, size, int64(len(b)))
	}
	n := int(size)
	rec := b[:n]
	sysFlag := int32(be.Uint32(rec[PosSysFlag:]))
	bodyAt := fixedLen(sysFlag)
	if bodyAt+4 > n {
		return View{}, corrupt(ReasonBadLength, int64(bodyAt+4), size)
	}
	bodyLen := int64(int32(be.Uint32(rec[bodyAt:])))
	tls := ver.TopicLenSize()
	topAt := int64(bodyAt) + 4 + bodyLen
	if bodyLen < 0 || topAt+int64(tls) > size {
		return View{}, corrupt(ReasonBadLength, bodyLen, size-int64(bodyAt)-4-int64(tls))
	}
	var topicLen int64
	if ver == V2 {
		topicLen = int64(int16(be.Uint16(rec[topAt:])))
	} else {
		topicLen = int64(int8(rec[topAt])) // Java reads it as a signed byte
	}
	propAt := topAt + int64(tls) + topicLen
	if topicLen < 0 || propAt+2 > size {
		return View{}, corrupt(ReasonBadLength, topicLen, size-topAt-int64(tls)-2)
	}
	propsLen := int64(int16(be.Uint16(rec[propAt:])))
	if propsLen < 0 {
		return View{}, corrupt(ReasonBadLength, propsLen, size-propAt-2)
	}
	if want := propAt + 2 + propsLen; want != size {
		return View{}, corrupt(ReasonSizeMismatch, size, want)
	}
	return View{rec: rec, bodyAt: bodyAt, topAt: int(topAt), propAt: int(propAt)}, nil
}

// Bytes returns the whole record, TOTALSIZE bytes.
func (v View) Bytes() []byte { return v.rec }

func (v View) u32(p int) uint32 { return binary.BigEndian.Uint32(v.rec[p:]) }
func (v View) i64(p int) int64  { return int64(binary.BigEndian.Uint64(v.rec[p:])) }

// TotalSize returns TOTALSIZE: the length of the record.
func (v View) TotalSize() int { return len(v.rec) }

// Magic returns MAGICCODE.
func (v View) Magic() uint32 { return v.u32(PosMagic) }

// Version returns the record version given by its magic code.
func (v View) Version() Version {
	ver, _ := VersionOf(v.Magic())
	return ver
}

// BodyCRC returns the stored BODYCRC.
func (v View) BodyCRC() int32 { return int32(v.u32(PosBodyCRC)) }

// QueueID returns QUEUEID.
func (v View) QueueID() int32 { return int32(v.u32(PosQueueID)) }

// Flag returns FLAG, the client's opaque flag.
func (v View) Flag() int32 { return int32(v.u32(PosFlag)) }

// QueueOffset returns QUEUEOFFSET, the record's index in its consume queue.
func (v View) QueueOffset() int64 { return v.i64(PosQueueOffset) }

// PhysicalOffset returns PHYSICALOFFSET, the record's absolute offset in the commit log.
func (v View) PhysicalOffset() int64 { return v.i64(PosPhysicalOffset) }

// SysFlag returns SYSFLAG.
func (v View) SysFlag() int32 { return int32(v.u32(PosSysFlag)) }

// BornTimestamp returns BORNTIMESTAMP (producer clock, ms).
func (v View) BornTimestamp() int64 { return v.i64(PosBornTimestamp) }

// BornHost returns BORNHOST. Its port is the low 16 bits of the stored int; BornHostBytes has the
// field exactly as stored.
func (v View) BornHost() netip.AddrPort { return hostAt(v.BornHostBytes()) }

// BornHostBytes returns the BORNHOST field as stored: IP (4 or 16 bytes) then a 4-byte port.
func (v View) BornHostBytes() []byte {
	return v.rec[PosBornHost:StoreTimestampPos(v.SysFlag())]
}

// StoreTimestamp returns STORETIMESTAMP (broker clock, ms).
func (v View) StoreTimestamp() int64 { return v.i64(StoreTimestampPos(v.SysFlag())) }

// StoreHost returns STOREHOSTADDRESS. Its port is the low 16 bits of the stored int;
// StoreHostBytes has the field exactly as stored.
func (v View) StoreHost() netip.AddrPort { return hostAt(v.StoreHostBytes()) }

// StoreHostBytes returns the STOREHOSTADDRESS field as stored: IP (4 or 16 bytes) then a 4-byte port.
func (v View) StoreHostBytes() []byte {
	p := storeHostPos(v.SysFlag())
	return v.rec[p : p+hostLen(v.SysFlag()&FlagStoreHostV6 != 0)]
}

func hostAt(f []byte) netip.AddrPort {
	port := uint16(binary.BigEndian.Uint32(f[len(f)-4:]))
	if len(f) == 20 {
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(f[:16])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(f[:4])), port)
}

// ReconsumeTimes returns RECONSUMETIMES.
func (v View) ReconsumeTimes() int32 { return int32(v.u32(v.bodyAt - 12)) }

// PreparedTransactionOffset returns PREPARED TRANSACTION OFFSET.
func (v View) PreparedTransactionOffset() int64 { return v.i64(v.bodyAt - 8) }

// Body returns the body.
func (v View) Body() []byte { return v.rec[v.bodyAt+4 : v.topAt] }

// Topic returns the topic bytes.
func (v View) Topic() []byte { return v.rec[v.topAt+v.Version().TopicLenSize() : v.propAt] }

// Properties returns the stored properties string.
func (v View) Properties() Properties { return v.rec[v.propAt+2:] }

// TransactionType returns SYSFLAG & TxMask: TxNotType, TxPrepared, TxCommit or TxRollback.
func (v View) TransactionType() int32 { return v.SysFlag() & TxMask }

// UniqKey returns the UNIQ_KEY property (the client message id).
func (v View) UniqKey() ([]byte, bool) { return v.Properties().Get(PropUniqKey) }

// Keys returns an iterator over the keys of the KEYS property, empty tokens skipped.
func (v View) Keys() KeyIter {
	k, _ := v.Properties().Get(PropKeys)
	return Keys(k)
}

// HasPropCRC reports whether the record ends with a __CRC32# entry.
func (v View) HasPropCRC() bool { return hasPropCRC(v.Properties()) }

// Decode returns an owned copy of every field.
func (v View) Decode() Record {
	r := Record{
		Message: Message{
			Topic:                     strings.Clone(string(v.Topic())),
			QueueID:                   v.QueueID(),
			Flag:                      v.Flag(),
			SysFlag:                   v.SysFlag(),
			BornTimestamp:             v.BornTimestamp(),
			BornHost:                  v.BornHost(),
			StoreHost:                 v.StoreHost(),
			ReconsumeTimes:            v.ReconsumeTimes(),
			PreparedTransactionOffset: v.PreparedTransactionOffset(),
			Body:                      bytes.Clone(v.Body()),
			Properties:                bytes.Clone(v.Properties()),
		},
		Version:        v.Version(),
		TotalSize:      v.TotalSize(),
		BodyCRC:        v.BodyCRC(),
		QueueOffset:    v.QueueOffset(),
		PhysicalOffset: v.PhysicalOffset(),
		StoreTimestamp: v.StoreTimestamp(),
	}
	return r
}

// Decode parses the record at the start of b, checking its structure and, per chk, its CRCs, and
// returns an owned copy of it.
func Decode(b []byte, chk Check) (Record, error) {
	v, err := Parse(b)
	if err == nil {
		err = verify(v, chk)
	}
	if err != nil {
		return Record{}, err
	}
	return v.Decode(), nil
}
