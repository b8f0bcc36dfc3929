package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Size is the length of a checkpoint file (RocketMQ maps one OS page).
const Size = 4096

// The layout. RocketMQ's five longs come first; our extension follows in bytes RocketMQ keeps
// zero and writes back unchanged:
//
//	 0  physicMsgTimestamp   int64   RocketMQ
//	 8  logicsMsgTimestamp   int64   RocketMQ
//	16  indexMsgTimestamp    int64   RocketMQ (the last field of older versions)
//	24  masterFlushedOffset  int64   RocketMQ
//	32  confirmPhyOffset     int64   RocketMQ
//	40  magic "RSCK"         4 bytes
//	44  version              uint16  2
//	46  length               uint16  bytes from magic through crc: 40 in version 2
//	48  durableOffset        int64
//	56  dispatchedOffset     int64
//	64  propCRCFrom          int64   first offset from which every record has __CRC32#
//	72  headerCRC            uint32  CRC-32C of bytes [0, 40) as the engine wrote them
//	76  crc                  uint32  CRC-32C (Castagnoli) of bytes [40, 40+length-4)
//	80  zero up to 4096
//
// RocketMQ rewrites bytes 0-39 whenever it runs on the store, so the extension's CRC covers only
// the extension: a checkpoint RocketMQ rewrote keeps an intact extension, and headerCRC tells
// that it was rewritten (Ext.Rewritten). length lets a later version append fields that this one
// skips: the CRC is found and checked from length alone, and version changes only when old
// readers must refuse.
//
// Version 1, which earlier engines wrote, had no headerCRC and its crc covered bytes [0, 40) too
// (length 28, or 36 with propCRCFrom). It still reads: intact, or with only bytes 24-39 changed
// (the HA and confirm offsets, which those engines always wrote as zeros and RocketMQ sets as it
// recovers) as Rewritten; with any other change it cannot be told from damage and is ignored
// (Ext.Stale).
const (
	rocketMQLen    = 40 // the five longs
	rocketMQMinLen = 24 // what versions before the HA fields wrote
	extOff         = rocketMQLen
	extVersion     = 2
	extLenV2       = 40
	extVersion1    = 1
	extLenV1       = 28
	extLenV1b      = 36 // with propCRCFrom
	extMaxLen      = Size - extOff
	// v1ZeroFrom and v1ZeroTo bound the RocketMQ fields version-1 writers always left zero.
	v1ZeroFrom, v1ZeroTo = 24, 40
)

var (
	extMagic   = [4]byte{'R', 'S', 'C', 'K'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// Decode errors. Decode wraps them with the detail.
var (
	// ErrCorrupt: the bytes are not a checkpoint we can trust: too short, or the extension is
	// damaged, or its CRC does not match.
	ErrCorrupt = errors.New("checkpoint: corrupt")
	// ErrVersion: the extension is intact but of a version this code cannot read.
	ErrVersion = errors.New("checkpoint: unsupported extension version")
)

// Encode returns the Size bytes of the checkpoint file for c. Without a valid extension
// (c.Ext.Valid false) they are exactly what RocketMQ writes: the five longs, then zeros. The
// extension is always written in the current version; Rewritten and Stale are not written.
func Encode(c Checkpoint) []byte {
	b := make([]byte, Size)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(c.PhysicMsgTimestamp))
	be.PutUint64(b[8:], uint64(c.LogicsMsgTimestamp))
	be.PutUint64(b[16:], uint64(c.IndexMsgTimestamp))
	be.PutUint64(b[24:], uint64(c.MasterFlushedOffset))
	be.PutUint64(b[32:], uint64(c.ConfirmPhyOffset))
	if !c.Ext.Valid {
		return b
	}
	copy(b[extOff:], extMagic[:])
	be.PutUint16(b[extOff+4:], extVersion)
	be.PutUint16(b[extOff+6:], extLenV2)
	be.PutUint64(b[extOff+8:], uint64(c.Ext.DurableOffset))
	be.PutUint64(b[extOff+16:], uint64(c.Ext.DispatchedOffset))
	be.PutUint64(b[extOff+24:], uint64(c.Ext.PropCRCFrom))
	be.PutUint32(b[extOff+32:], crc32.Checksum(b[:rocketMQLen], castagnoli))
	crcOff := extOff + extLenV2 - 4
	be.PutUint32(b[crcOff:], crc32.Checksum(b[extOff:crcOff], castagnoli))
	return b
}

// Decode parses a checkpoint file. It accepts what RocketMQ accepts: 24 bytes or more, with
// missing bytes read as zeros (RocketMQ maps a full page over a shorter file) and bytes past
// Size ignored.
//
// A file whose bytes after the first 40 are zero has no extension: it decodes with Ext.Valid
// false and no error. Any other content there must be an intact extension (or a version-1 one
// that can no longer be checked, see Ext.Stale), or Decode fails with an error wrapping
// ErrCorrupt (or ErrVersion); the returned Checkpoint then still holds the five RocketMQ fields
// as read, with Ext zero, for a caller that wants RocketMQ's view: RocketMQ reads them without
// any check, and so may we.
func Decode(b []byte) (Checkpoint, error) {
	if len(b) < rocketMQMinLen {
		return Checkpoint{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrCorrupt, len(b), rocketMQMinLen)
	}
	var page [Size]byte
	copy(page[:], b)
	be := binary.BigEndian
	c := Checkpoint{
		PhysicMsgTimestamp:  int64(be.Uint64(page[0:])),
		LogicsMsgTimestamp:  int64(be.Uint64(page[8:])),
		IndexMsgTimestamp:   int64(be.Uint64(page[16:])),
		MasterFlushedOffset: int64(be.Uint64(page[24:])),
		ConfirmPhyOffset:    int64(be.Uint64(page[32:])),
	}
	ext, err := decodeExt(&page)
	if err != nil {
		return c, err
	}
	c.Ext = ext
	return c, nil
}

// decodeExt reads the extension from a whole page.
func decodeExt(page *[Size]byte) (Ext, error) {
	be := binary.BigEndian
	if [4]byte(page[extOff:extOff+4]) != extMagic {
		// Zeros are RocketMQ's file. Anything else is a damaged magic or something we do not
		// know; neither may pass for "no extension", or a flipped magic byte would go unseen.
		for i, x := range page[extOff : extOff+extLenV2] {
			if x != 0 {
				return Ext{}, fmt.Errorf("%w: byte %d is %#02x where an extension or zeros belong", ErrCorrupt, extOff+i, x)
			}
		}
		return Ext{}, nil
	}
	v, n := be.Uint16(page[extOff+4:]), int(be.Uint16(page[extOff+6:]))
	if v == extVersion1 {
		return decodeV1(page, n)
	}
	if n < extLenV2 || n > extMaxLen {
		return Ext{}, fmt.Errorf("%w: extension length %d outside [%d, %d]", ErrCorrupt, n, extLenV2, extMaxLen)
	}
	crcOff := extOff + n - 4
	if got, want := be.Uint32(page[crcOff:]), crc32.Checksum(page[extOff:crcOff], castagnoli); got != want {
		return Ext{}, fmt.Errorf("%w: crc %#08x, computed %#08x", ErrCorrupt, got, want)
	}
	if v != extVersion {
		return Ext{}, fmt.Errorf("%w: version %d, this code reads %d", ErrVersion, v, extVersion)
	}
	return Ext{
		Valid:            true,
		Rewritten:        be.Uint32(page[extOff+32:]) != crc32.Checksum(page[:rocketMQLen], castagnoli),
		DurableOffset:    int64(be.Uint64(page[extOff+8:])),
		DispatchedOffset: int64(be.Uint64(page[extOff+16:])),
		PropCRCFrom:      int64(be.Uint64(page[extOff+24:])),
	}, nil
}

// decodeV1 reads a version-1 extension of length n, whose CRC covers RocketMQ's bytes too.
func decodeV1(page *[Size]byte, n int) (Ext, error) {
	be := binary.BigEndian
	if n < extLenV1 || n > extMaxLen {
		return Ext{}, fmt.Errorf("%w: extension length %d outside [%d, %d]", ErrCorrupt, n, extLenV1, extMaxLen)
	}
	crcOff := extOff + n - 4
	got := be.Uint32(page[crcOff:])
	rewritten := false
	if got != crc32.Checksum(page[:crcOff], castagnoli) {
		// RocketMQ sets confirmPhyOffset as it recovers and flushes it within a second: with
		// those fields as the engine wrote them (zeros) the CRC matches again when nothing else
		// changed, and the extension is known intact.
		var orig [Size]byte
		copy(orig[:crcOff], page[:crcOff])
		clear(orig[v1ZeroFrom:v1ZeroTo])
		switch {
		case got == crc32.Checksum(orig[:crcOff], castagnoli):
		case n == extLenV1 || n == extLenV1b:
			// The lengths those engines wrote: RocketMQ ran with traffic, or damage.
			return Ext{Stale: true}, nil
		default:
			return Ext{}, fmt.Errorf("%w: version-1 extension of length %d with crc %#08x matching nothing", ErrCorrupt, n, got)
		}
		rewritten = true
	}
	ext := Ext{
		Valid:            true,
		Rewritten:        rewritten,
		DurableOffset:    int64(be.Uint64(page[extOff+8:])),
		DispatchedOffset: int64(be.Uint64(page[extOff+16:])),
		PropCRCFrom:      -1,
	}
	if n >= extLenV1b {
		ext.PropCRCFrom = int64(be.Uint64(page[extOff+24:]))
	}
	return ext, nil
}
