package offsets

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// JournalFileName is the journal in the store's config directory.
const JournalFileName = "consumerOffset.journal"

// The journal's layout. Integers are big-endian.
//
//	header (journalHeaderSize bytes):
//	  0  magic     "RSOFFJ01"
//	  8  base      SHA-256 of the consumerOffset.json bytes the journal extends
//	  40 crc       CRC-32C of bytes [0, 40)
//	records, each:
//	  0  size      uint32  bytes of the record after this field (crc and body)
//	  4  crc       uint32  CRC-32C of the body
//	  8  body:
//	     kind      uint8   kindCommit or kindDelete
//	     time      int64   ms since the epoch
//	     queueId   int32   (kindCommit)
//	     offset    int64   (kindCommit)
//	     epoch     int64   (kindCommit) the assignment epoch, 0 outside a group's membership
//	     group     uint16 length, bytes
//	     topic     uint16 length, bytes
//	     member    uint8 length, bytes (kindCommit)
//
// Replay stops at the first record that is short, too large or fails its CRC: the torn tail of
// a write a crash cut. Nothing is written after it, since the journal is replaced at the next
// start.
const (
	journalMagic      = "RSOFFJ01"
	journalHeaderSize = 44
	recordFixed       = 4 + 4 + 1 + 8 + 4 + 8 + 8 + 2 + 2 + 1
	// maxRecord bounds a record's size field: names longer than their limits never get here.
	maxRecord = recordFixed + MaxGroupLen + commitlog.MaxSysTopicLen + MaxMemberLen
)

// Record kinds.
const (
	kindCommit = 1
	kindDelete = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one change of the journal.
type record struct {
	kind    uint8
	time    int64
	queueID int32
	offset  int64
	epoch   int64
	group   string
	topic   string
	member  string
}

// appendHeader appends the journal's header for a table whose bytes hash to base.
func appendHeader(b []byte, base [sha256.Size]byte) []byte {
	b = append(b, journalMagic...)
	b = append(b, base[:]...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[len(b)-40:], castagnoli))
}

// appendRecord appends r, encoded, to b.
func appendRecord(b []byte, r record) []byte {
	start := len(b)
	b = append(b, make([]byte, 8)...) // size and crc, set below
	b = append(b, r.kind)
	b = binary.BigEndian.AppendUint64(b, uint64(r.time))
	b = binary.BigEndian.AppendUint32(b, uint32(r.queueID))
	b = binary.BigEndian.AppendUint64(b, uint64(r.offset))
	b = binary.BigEndian.AppendUint64(b, uint64(r.epoch))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.group)))
	b = append(b, r.group...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.topic)))
	b = append(b, r.topic...)
	b = append(b, uint8(len(r.member)))
	b = append(b, r.member...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+8:], castagnoli))
	return b
}

var errTorn = errors.New("offsets: torn journal record")

// decodeHeader returns the base hash of a journal's header.
func decodeHeader(b []byte) ([sha256.Size]byte, error) {
	var base [sha256.Size]byte
	if len(b) < journalHeaderSize || string(b[:8]) != journalMagic {
		return base, fmt.Errorf("offsets: %s: no journal header", JournalFileName)
	}
	if crc32.Checksum(b[:40], castagnoli) != binary.BigEndian.Uint32(b[40:]) {
		return base, fmt.Errorf("offsets: %s: header CRC mismatch", JournalFileName)
	}
	copy(base[:], b[8:40])
	return base, nil
}

// decodeRecord decodes the record at the start of b and returns it with its encoded length.
// errTorn means b holds no whole, valid record there: replay stops.
func decodeRecord(b []byte) (record, int, error) {
	if len(b) < 8 {
		return record{}, 0, errTorn
	}
	size := binary.BigEndian.Uint32(b)
	if size < recordFixed-4 || size > maxRecord-4 || int64(size) > int64(len(b)-4) {
		return record{}, 0, errTorn
	}
	n := int(size) + 4
	body := b[8:n]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return record{}, 0, errTorn
	}
	r := record{kind: body[0]}
	r.time = int64(binary.BigEndian.Uint64(body[1:]))
	r.queueID = int32(binary.BigEndian.Uint32(body[9:]))
	r.offset = int64(binary.BigEndian.Uint64(body[13:]))
	r.epoch = int64(binary.BigEndian.Uint64(body[21:]))
	rest := body[29:]
	var ok bool
	if r.group, rest, ok = cutString(rest, 2); !ok {
		return record{}, 0, errTorn
	}
	if r.topic, rest, ok = cutString(rest, 2); !ok {
		return record{}, 0, errTorn
	}
	if r.member, rest, ok = cutString(rest, 1); !ok || len(rest) != 0 {
		return record{}, 0, errTorn
	}
	// A record whose CRC matches but whose content is not what the engine writes is damage,
	// not a torn tail: it is refused the same way, and what follows it is not trusted.
	switch {
	case r.kind != kindCommit && r.kind != kindDelete,
		ValidateGroup(r.group) != nil, commitlog.ValidateTopic(r.topic) != nil,
		r.kind == kindCommit && (r.queueID < 0 || r.offset < 0 || r.epoch < 0):
		return record{}, 0, fmt.Errorf("offsets: %s: a record with a valid CRC that the engine does not write (kind %d, group %q, topic %q, queue %d, offset %d)",
			JournalFileName, r.kind, r.group, r.topic, r.queueID, r.offset)
	}
	return r, n, nil
}

// cutString takes a string prefixed by its length in lenBytes bytes off the front of b.
func cutString(b []byte, lenBytes int) (string, []byte, bool) {
	if len(b) < lenBytes {
		return "", nil, false
	}
	var n int
	if lenBytes == 2 {
		n = int(binary.BigEndian.Uint16(b))
	} else {
		n = int(b[0])
	}
	b = b[lenBytes:]
	if len(b) < n {
		return "", nil, false
	}
	return string(b[:n]), b[n:], true
}

// replayJournal applies the records of a journal to t, in order, and says how many it applied
// and whether it stopped at a torn tail. A journal whose base is not want is not applied
// (errStaleJournal).
func replayJournal(b []byte, want [sha256.Size]byte, apply func(record)) (applied int, torn bool, err error) {
	base, err := decodeHeader(b)
	if err != nil {
		return 0, false, err
	}
	if base != want {
		return 0, false, errStaleJournal
	}
	for b = b[journalHeaderSize:]; len(b) > 0; {
		r, n, err := decodeRecord(b)
		if errors.Is(err, errTorn) {
			return applied, !allZero(b), nil
		}
		if err != nil {
			return applied, false, err
		}
		apply(r)
		applied++
		b = b[n:]
	}
	return applied, false, nil
}

var errStaleJournal = errors.New("offsets: the journal extends another consumerOffset.json than the one there")

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
