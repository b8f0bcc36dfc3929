package commitlog

import (
	"net/netip"
	"unicode/utf8"
)

// Magic codes in the MAGICCODE field. The version decides only the width of TOPICLENGTH.
const (
	MagicV1    uint32 = 0xDAA320A7 // MESSAGE_MAGIC_CODE: 1-byte topic length
	MagicV2    uint32 = 0xDAA320AB // MESSAGE_MAGIC_CODE_V2: 2-byte topic length
	MagicBlank uint32 = 0xCBD43194 // BLANK_MAGIC_CODE: end-of-file filler
)

// BlankSize is END_FILE_MIN_BLANK_LENGTH: the bytes the end-of-file filler writes (int maxBlank,
// int BLANK magic), and the room every segment keeps free after its last record so that the filler
// always fits.
const BlankSize = 8

// Size limits, as in RocketMQ's MessageExtEncoder and MessageStoreConfig.
const (
	// DefaultMaxBodySize is maxMessageSize: despite its name it bounds the body, not the record.
	DefaultMaxBodySize = 4 << 20
	// RecordOverhead is what a record may add to the body bound: the encoder's buffer and the
	// whole-record limit are maxMessageSize + 64 KiB.
	RecordOverhead = 64 << 10
	// MaxPropertiesLen is Short.MAX_VALUE: PROPERTIESLENGTH is a signed 2-byte field.
	MaxPropertiesLen = 32767
	// PropCRCLen is CRC32_RESERVED_LEN: `__CRC32#` 0x01, 10 digits, 0x02.
	PropCRCLen = len(PropCRC32) + 1 + 10 + 1
	// MaxTopicLenV1 is the longest topic a V1 record can hold: readers take TOPICLENGTH as a
	// signed byte.
	MaxTopicLenV1 = 127
)

// SYSFLAG bits (MessageSysFlag).
const (
	FlagCompressed  int32 = 0x1  // body compressed by the client; the store never compresses
	FlagMultiTags   int32 = 0x2  // multi-tag filter type; does not change the tags code
	FlagBornHostV6  int32 = 0x10 // BORNHOST is 16-byte IPv6 + port; later fields move by 12
	FlagStoreHostV6 int32 = 0x20 // STOREHOSTADDRESS is 16-byte IPv6 + port; later fields move by 12
	FlagNeedUnwrap  int32 = 0x40 // batch marker
	FlagInnerBatch  int32 = 0x80 // inner-batch message (BatchConsumeQueue)

	// TxMask selects the transaction type; the four values below are its only outcomes.
	TxMask     int32 = 0xC
	TxNotType  int32 = 0x0
	TxPrepared int32 = 0x4
	TxCommit   int32 = 0x8
	TxRollback int32 = 0xC

	// CompressionMask selects the compression type; 0 with FlagCompressed means ZLIB (legacy).
	CompressionMask int32 = 0x700
	CompressionLZ4  int32 = 0x100
	CompressionZSTD int32 = 0x200
	CompressionZLIB int32 = 0x300
)

// Fixed field positions, relative to the record start. Fields after BORNHOST move with the host
// widths; [StoreTimestampPos] gives the one the writer stamps.
const (
	PosTotalSize      = 0
	PosMagic          = 4
	PosBodyCRC        = 8
	PosQueueID        = 12
	PosFlag           = 16
	PosQueueOffset    = 20
	PosPhysicalOffset = 28
	PosSysFlag        = 36
	PosBornTimestamp  = 40
	PosBornHost       = 48
)

// MinRecordLen is the shortest possible record: V1, IPv4 hosts, empty body, topic and properties.
const MinRecordLen = 91

// Version is the record format version, chosen per record from the topic length.
type Version uint8

// The two record versions. The zero Version is invalid.
const (
	V1 Version = 1
	V2 Version = 2
)

// Magic returns the MAGICCODE of v (MagicV1 for anything but V2).
func (v Version) Magic() uint32 {
	if v == V2 {
		return MagicV2
	}
	return MagicV1
}

// TopicLenSize returns the width of the TOPICLENGTH field: 1 byte in V1, 2 in V2.
func (v Version) TopicLenSize() int {
	if v == V2 {
		return 2
	}
	return 1
}

// VersionOf maps a MAGICCODE to its version; ok is false for the blank magic and anything else.
func VersionOf(magic uint32) (v Version, ok bool) {
	switch magic {
	case MagicV1:
		return V1, true
	case MagicV2:
		return V2, true
	}
	return 0, false
}

// VersionForTopic returns the version RocketMQ picks for a topic (autoMessageVersionOnTopicLen):
// V2 when the topic has more than 127 Java chars, counted in UTF-16 units as String.length() does.
func VersionForTopic(topic string) Version {
	if javaLen(topic) > MaxTopicLenV1 {
		return V2
	}
	return V1
}

// javaLen is Java's String.length() for a UTF-8 string: UTF-16 code units, where an invalid byte
// decodes to one U+FFFD.
func javaLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// hostLen returns the width of a host field for the given V6 flag: IP plus a 4-byte port.
func hostLen(v6 bool) int {
	if v6 {
		return 16 + 4
	}
	return 4 + 4
}

// IsHostV6 reports whether a host takes the 20-byte IPv6 form. Java stores an IPv4-mapped IPv6
// literal as an Inet4Address, so such addresses take the 4-byte form, like plain IPv4. The zero
// Addr (no host known) is written as 0.0.0.0 in the 4-byte form.
func IsHostV6(a netip.Addr) bool {
	return a.IsValid() && !a.Unmap().Is4()
}

// HostFlags returns the SYSFLAG V6 bits for a born and a store host.
func HostFlags(born, store netip.Addr) int32 {
	var f int32
	if IsHostV6(born) {
		f |= FlagBornHostV6
	}
	if IsHostV6(store) {
		f |= FlagStoreHostV6
	}
	return f
}

// fixedLen is the size of everything before BODYLENGTH: 84, 96 or 108 bytes for 0, 1 or 2 IPv6 hosts.
func fixedLen(sysFlag int32) int {
	return PosBornHost + hostLen(sysFlag&FlagBornHostV6 != 0) + 8 + hostLen(sysFlag&FlagStoreHostV6 != 0) + 4 + 8
}

// StoreTimestampPos returns the position of STORETIMESTAMP: 56, or 68 with an IPv6 born host.
func StoreTimestampPos(sysFlag int32) int {
	return PosBornHost + hostLen(sysFlag&FlagBornHostV6 != 0)
}

// storeHostPos returns the position of STOREHOST.
func storeHostPos(sysFlag int32) int {
	return StoreTimestampPos(sysFlag) + 8
}

// RecordLen is RocketMQ's calMsgLength: the TOTALSIZE of a record with these lengths. Readers
// require TOTALSIZE to equal it.
func RecordLen(version Version, sysFlag int32, bodyLen, topicLen, propsLen int) int {
	return fixedLen(sysFlag) + 4 + max(bodyLen, 0) + version.TopicLenSize() + topicLen + 2 + max(propsLen, 0)
}

// Fits reports whether a record of recordLen bytes may be appended where remaining bytes are left
// in the segment: the blank filler must still fit after it (L + 8 <= remaining). When it does not,
// the writer writes [Blank] and moves to the next segment.
func Fits(recordLen, remaining int) bool {
	return recordLen+BlankSize <= remaining
}
