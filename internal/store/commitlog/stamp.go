package commitlog

import (
	"encoding/binary"
	"hash/crc32"
)

// BodyCRC is the stored BODYCRC of a body: CRC-32/IEEE (java.util.zip.CRC32) masked with
// 0x7FFFFFFF so that it is never negative; 0 for an empty body.
func BodyCRC(body []byte) int32 {
	return maskedCRC(body)
}

func maskedCRC(b []byte) int32 {
	return int32(crc32.ChecksumIEEE(b) & 0x7FFFFFFF)
}

// Stamp fills in the three fields only the single writer knows, in place, in rec: the record as
// copied into the mapped segment (rec may run past the record; TOTALSIZE bounds what is touched).
// queueOffset must be 0 for prepared and rollback transactional messages, as RocketMQ writes them.
//
// With propCRC (the record was encoded with EncodeOptions.PropCRC) it then computes the masked
// CRC-32 of the first TOTALSIZE-20 bytes, stamped fields included, and writes it into the reserved
// last 20 bytes as `__CRC32#` 0x01, ten ASCII digits least-significant first, zero padded, 0x02
// (449884819 → "9184889440"): RocketMQ's MessageDecoder.createCrc32.
//
// Stamp allocates nothing: it runs on the writer's hot path, once per record. It panics if rec is
// shorter than its TOTALSIZE, which only a caller bug can cause.
func Stamp(rec []byte, queueOffset, physicalOffset, storeTimestamp int64, propCRC bool) {
	be := binary.BigEndian
	be.PutUint64(rec[PosQueueOffset:], uint64(queueOffset))
	be.PutUint64(rec[PosPhysicalOffset:], uint64(physicalOffset))
	sysFlag := int32(be.Uint32(rec[PosSysFlag:]))
	be.PutUint64(rec[StoreTimestampPos(sysFlag):], uint64(storeTimestamp))
	if propCRC {
		n := int(be.Uint32(rec[PosTotalSize:]))
		rec = rec[:n]
		putPropCRC(rec[n-PropCRCLen:], maskedCRC(rec[:n-PropCRCLen]))
	}
}

// putPropCRC writes the 20-byte __CRC32# entry for crc into dst.
func putPropCRC(dst []byte, crc int32) {
	_ = dst[PropCRCLen-1]
	copy(dst, propCRCEntryPrefix)
	d := dst[len(propCRCEntryPrefix) : len(propCRCEntryPrefix)+10]
	u := uint32(crc)             // masked: never negative
	for i := 0; i < 10; i += 2 { // two digits at a time: half the divisions, once per record
		pair := u % 100
		u /= 100
		d[i], d[i+1] = digitPairs[2*pair+1], digitPairs[2*pair]
	}
	dst[PropCRCLen-1] = PropertySeparator
}

// digitPairs holds "00" to "99".
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// propCRCValue parses the digits of a __CRC32# entry (least-significant first). ok is false if a
// digit is not '0'..'9'.
func propCRCValue(entry []byte) (v int64, ok bool) {
	d := entry[len(propCRCEntryPrefix) : len(propCRCEntryPrefix)+10]
	for i := len(d) - 1; i >= 0; i-- {
		c := d[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// hasPropCRC reports whether props end with a __CRC32# entry (any 10 bytes for the digits): where
// the writer reserves it. The bytes before it need no check: the CRC covers them.
func hasPropCRC(props []byte) bool {
	n := len(props) - PropCRCLen
	if n < 0 {
		return false
	}
	// A whole entry: at the start or after a separator. Otherwise the tail of some other
	// property (named "x__CRC32#", say) would pass for the entry and fail the check.
	if n > 0 && props[n-1] != PropertySeparator {
		return false
	}
	e := props[n:]
	return string(e[:len(propCRCEntryPrefix)]) == propCRCEntryPrefix && e[PropCRCLen-1] == PropertySeparator
}

// Blank writes the 8-byte end-of-file filler at dst[0:8]: int maxBlank (the bytes left in the
// segment from dst on, the filler included) and int BLANK magic. The rest of the segment is left
// as it is: zeros in a fresh, preallocated file.
func Blank(dst []byte, maxBlank int) {
	be := binary.BigEndian
	be.PutUint32(dst[PosTotalSize:], uint32(maxBlank))
	be.PutUint32(dst[PosMagic:], MagicBlank)
}
