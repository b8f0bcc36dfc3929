package checkpoint

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// The backup slot: the second half of the page holds a copy of what the engine's last in-place
// write put (or was about to put) in the first 80 bytes, so that a write torn by a power cut
// can always be told from damage and undone (see Save for the protocol and its argument):
//
//	2048  magic "RSCB"     4 bytes
//	2052  next             80 bytes: bytes [0, 80) as this write puts them in place
//	2132  prev             40 bytes: bytes [0, 40) as they were before this write
//	2172  crc              uint32  CRC-32C (Castagnoli) of bytes [2048, 2172)
//	2176  zero up to 4096
//
// RocketMQ never reads past byte 40 and writes the page back unchanged past it, so the slot
// survives RocketMQ running on the store; versions of the engine before it check only bytes
// [40, 80) and ignore the slot.
const (
	backupOff     = Size / 2
	backupNextOff = backupOff + 4
	backupPrevOff = backupNextOff + extOff + extLenV2
	backupCRCOff  = backupPrevOff + rocketMQLen
	backupEnd     = backupCRCOff + 4
	primaryLen    = extOff + extLenV2 // the bytes an in-place write changes in the first half
)

var backupMagic = [4]byte{'R', 'S', 'C', 'B'}

// encodeBackup fills the backup slot of page (whose first 80 bytes are what is about to be put
// in place) with them and prev, the first 40 bytes on disk before the write.
func encodeBackup(page []byte, prev []byte) {
	copy(page[backupOff:], backupMagic[:])
	copy(page[backupNextOff:backupPrevOff], page[:primaryLen])
	copy(page[backupPrevOff:backupCRCOff], prev[:rocketMQLen])
	binary.BigEndian.PutUint32(page[backupCRCOff:], crc32.Checksum(page[backupOff:backupCRCOff], castagnoli))
}

// backup is an intact backup slot.
type backup struct {
	next [primaryLen]byte
	prev [rocketMQLen]byte
}

// decodeBackup returns the backup slot of page when it is intact.
func decodeBackup(page *[Size]byte) (backup, bool) {
	if [4]byte(page[backupOff:backupNextOff]) != backupMagic ||
		binary.BigEndian.Uint32(page[backupCRCOff:]) != crc32.Checksum(page[backupOff:backupCRCOff], castagnoli) {
		return backup{}, false
	}
	var b backup
	copy(b.next[:], page[backupNextOff:backupPrevOff])
	copy(b.prev[:], page[backupPrevOff:backupCRCOff])
	return b, true
}

// DecodeFile decodes a checkpoint file the engine may have been rewriting in place when the
// power went (Save). Without an intact backup slot it is Decode. With one, the slot says what
// the last write put in the first 80 bytes (next) and what their first 40 were before (prev):
//
//   - When the first 40 bytes are next's or prev's, the engine wrote them and nobody changed
//     them since; whatever state the extension is in (next's, the previous one, torn), the last
//     write either completed or was cut short after its slot was durable, and next is the
//     checkpoint, whole. (RocketMQ, running on the store in between, would have rewritten those
//     bytes with its own values; if it rewrote them to the very bytes the engine wrote, it
//     appended nothing, since that would move its timestamps and confirm offset, and the
//     checkpoint means what it meant.)
//   - Otherwise RocketMQ rewrote them after the engine's last write (or the write tore them
//     mid-way, which cannot be told apart): next's extension, with the 40 bytes RocketMQ reads,
//     marked Rewritten, as Decode marks an intact extension whose 40 bytes changed.
//
// A slot that is intact but holds no valid extension cannot come from Save: the file is then
// Decode's.
func DecodeFile(b []byte) (Checkpoint, error) {
	p, perr := Decode(b)
	if len(b) < backupEnd || errors.Is(perr, ErrVersion) {
		return p, perr // too short for a slot; or a later version's, not this one's to second-guess
	}
	var page [Size]byte
	copy(page[:], b)
	bk, ok := decodeBackup(&page)
	if !ok {
		return p, perr
	}
	var nextPage [Size]byte
	copy(nextPage[:], bk.next[:])
	next, err := Decode(nextPage[:])
	if err != nil || !next.Ext.Valid || next.Ext.Rewritten {
		return p, perr
	}
	head := [rocketMQLen]byte(page[:rocketMQLen])
	if head == [rocketMQLen]byte(bk.next[:rocketMQLen]) || head == bk.prev {
		return next, nil
	}
	c := Checkpoint{
		PhysicMsgTimestamp: p.PhysicMsgTimestamp, LogicsMsgTimestamp: p.LogicsMsgTimestamp,
		IndexMsgTimestamp: p.IndexMsgTimestamp, MasterFlushedOffset: p.MasterFlushedOffset,
		ConfirmPhyOffset: p.ConfirmPhyOffset, Ext: next.Ext,
	}
	c.Ext.Rewritten = true
	return c, nil
}
