package commitlog

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
)

// EncodeOptions are the store settings the encoder needs. The zero value is RocketMQ's default.
type EncodeOptions struct {
	// PropCRC is enabledAppendPropCRC: reserve a 20-byte `__CRC32#` entry at the end of the
	// properties for the whole-record CRC that Stamp writes, after a 0x02 if the properties do not
	// already end with one. Stamp must then be called with propCRC true.
	PropCRC bool
	// MaxBodySize is maxMessageSize, a bound on the body; 0 means DefaultMaxBodySize (4 MiB).
	MaxBodySize int
}

func (o EncodeOptions) maxBody() int {
	if o.MaxBodySize <= 0 {
		return DefaultMaxBodySize
	}
	return o.MaxBodySize
}

// propCRCPlaceholder is what an encoded but unstamped record holds where Stamp writes the CRC: an
// entry that already parses, for CRC 0.
const propCRCPlaceholder = propCRCEntryPrefix + "0000000000\x02"

// AppendRecord encodes m as one record appended to dst and returns the extended slice. It writes
// every field except QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP, which it leaves zero for Stamp,
// computes BODYCRC, sets the SYSFLAG V6 bits from the hosts and picks V2 for topics longer than 127
// chars. It is meant to run in parallel before the single writer, which then only copies and stamps.
//
// Any __CRC32# entry in m.Properties is removed, with or without PropCRC: the name is reserved for
// the store's whole-record CRC, and a scan must be able to trust an entry it finds at the end of a
// record. (RocketMQ removes it only with PropCRC on; this is the one way our bytes can differ.)
//
// It checks the limits RocketMQ checks and returns, wrapped with the detail, ErrInvalidTopic,
// ErrBodyTooLarge, ErrPropertiesTooLarge or ErrRecordTooLarge; dst is then returned unchanged.
// The properties themselves are not checked: build them with AppendProperty after CheckProperty.
//
// It allocates nothing when dst has room for the record.
func AppendRecord(dst []byte, m *Message, opt EncodeOptions) ([]byte, error) {
	if err := ValidateTopic(m.Topic); err != nil {
		return dst, err
	}
	maxBody := opt.maxBody()
	if len(m.Body) > maxBody {
		return dst, fmt.Errorf("%w: body is %d bytes, limit %d", ErrBodyTooLarge, len(m.Body), maxBody)
	}
	var plan propsPlan
	propsLen, endsWithSep := lenWithoutPropCRC(m.Properties)
	plan.strip = propsLen != len(m.Properties)
	if opt.PropCRC {
		plan.reserve = true
		plan.sep = propsLen > 0 && !endsWithSep
		propsLen += PropCRCLen
		if plan.sep {
			propsLen++
		}
	}
	if propsLen > MaxPropertiesLen {
		return dst, fmt.Errorf("%w: properties take %d bytes as stored (with PropCRC: %v), limit %d",
			ErrPropertiesTooLarge, propsLen, opt.PropCRC, MaxPropertiesLen)
	}
	sysFlag := m.SysFlag&^(FlagBornHostV6|FlagStoreHostV6) | HostFlags(m.BornHost.Addr(), m.StoreHost.Addr())
	ver := VersionForTopic(m.Topic)
	n := RecordLen(ver, sysFlag, len(m.Body), len(m.Topic), propsLen)
	if int64(n) > int64(maxBody)+RecordOverhead || n > math.MaxInt32 {
		return dst, fmt.Errorf("%w: record is %d bytes, limit %d", ErrRecordTooLarge, n,
			min(int64(maxBody)+RecordOverhead, math.MaxInt32))
	}
	return appendFields(dst, n, ver, sysFlag, m, propsLen, plan), nil
}

// propsPlan says how appendFields writes the properties.
type propsPlan struct {
	strip   bool // drop every __CRC32# entry
	sep     bool // then add a 0x02
	reserve bool // then add the __CRC32# placeholder Stamp fills in
}

// appendFields writes a record of total bytes from m with the given version and SYSFLAG, trusting
// that the lengths agree, and its properties as plan says.
func appendFields(dst []byte, total int, ver Version, sysFlag int32, m *Message, propsLen int, plan propsPlan) []byte {
	start := len(dst)
	dst = slices.Grow(dst, total)[:start+total]
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint32(b[PosTotalSize:], uint32(total))
	be.PutUint32(b[PosMagic:], ver.Magic())
	be.PutUint32(b[PosBodyCRC:], uint32(BodyCRC(m.Body)))
	be.PutUint32(b[PosQueueID:], uint32(m.QueueID))
	be.PutUint32(b[PosFlag:], uint32(m.Flag))
	clear(b[PosQueueOffset:PosSysFlag]) // QUEUEOFFSET and PHYSICALOFFSET: the writer stamps them
	be.PutUint32(b[PosSysFlag:], uint32(sysFlag))
	be.PutUint64(b[PosBornTimestamp:], uint64(m.BornTimestamp))
	p := putHost(b, PosBornHost, m.BornHost, sysFlag&FlagBornHostV6 != 0)
	clear(b[p : p+8]) // STORETIMESTAMP: the writer stamps it
	p = putHost(b, p+8, m.StoreHost, sysFlag&FlagStoreHostV6 != 0)
	be.PutUint32(b[p:], uint32(m.ReconsumeTimes))
	be.PutUint64(b[p+4:], uint64(m.PreparedTransactionOffset))
	be.PutUint32(b[p+12:], uint32(len(m.Body)))
	p += 16
	p += copy(b[p:], m.Body)
	if ver == V2 {
		be.PutUint16(b[p:], uint16(len(m.Topic)))
		p += 2
	} else {
		b[p] = byte(len(m.Topic))
		p++
	}
	p += copy(b[p:], m.Topic)
	be.PutUint16(b[p:], uint16(propsLen))
	p += 2
	if !plan.strip {
		p += copy(b[p:], m.Properties)
	} else {
		// b has exactly the room lenWithoutPropCRC computed, so this append writes in place.
		p += len(appendWithoutPropCRC(b[p:p], m.Properties))
	}
	if plan.sep {
		b[p] = PropertySeparator
		p++
	}
	if plan.reserve {
		copy(b[p:], propCRCPlaceholder)
	}
	return dst
}

// putHost writes a host field at b[p:] in its 4- or 16-byte form and returns the position after it.
// A host that cannot take the 4-byte form (which AppendRecord never asks for) is written as zeros.
func putHost(b []byte, p int, h netip.AddrPort, v6 bool) int {
	a := h.Addr()
	if v6 {
		ip := a.As16()
		p += copy(b[p:], ip[:])
	} else {
		if a = a.Unmap(); a.Is4() {
			ip := a.As4()
			copy(b[p:], ip[:])
		} else {
			clear(b[p : p+4])
		}
		p += 4
	}
	binary.BigEndian.PutUint32(b[p:], uint32(h.Port()))
	return p + 4
}
