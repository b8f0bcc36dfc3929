package indexfile

import (
	"encoding/binary"
	"errors"
)

// HeaderSize is the size of an index file's header (IndexHeader.INDEX_HEADER_SIZE).
const HeaderSize = 40

// Byte offsets of the header fields.
const (
	offBeginTimestamp = 0
	offEndTimestamp   = 8
	offBeginPhyOffset = 16
	offEndPhyOffset   = 24
	offHashSlotCount  = 32
	offIndexCount     = 36
)

// ErrShort is returned by the decoders for a buffer smaller than the structure.
var ErrShort = errors.New("indexfile: buffer too short")

// Header is the 40-byte header of an index file. Timestamps are the CommitLog store timestamps
// (ms) of the first and last message indexed; offsets are their CommitLog offsets.
//
// IndexCount is the number of the next entry to write, so a file with n keys has IndexCount n+1.
// On disk it reads 0 until the first put; a File holds it as 1 then (RocketMQ's in-memory start).
type Header struct {
	BeginTimestamp int64
	EndTimestamp   int64
	BeginPhyOffset int64
	EndPhyOffset   int64
	HashSlotCount  int32
	IndexCount     int32
}

// Put encodes h into b[:HeaderSize]. It panics if b is shorter, like a slice index would.
func (h Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint64(b[offBeginTimestamp:], uint64(h.BeginTimestamp))
	binary.BigEndian.PutUint64(b[offEndTimestamp:], uint64(h.EndTimestamp))
	binary.BigEndian.PutUint64(b[offBeginPhyOffset:], uint64(h.BeginPhyOffset))
	binary.BigEndian.PutUint64(b[offEndPhyOffset:], uint64(h.EndPhyOffset))
	binary.BigEndian.PutUint32(b[offHashSlotCount:], uint32(h.HashSlotCount))
	binary.BigEndian.PutUint32(b[offIndexCount:], uint32(h.IndexCount))
}

// DecodeHeader decodes the first HeaderSize bytes of b as they are on disk (IndexCount is not
// adjusted; OpenFile does that).
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	return Header{
		BeginTimestamp: int64(binary.BigEndian.Uint64(b[offBeginTimestamp:])),
		EndTimestamp:   int64(binary.BigEndian.Uint64(b[offEndTimestamp:])),
		BeginPhyOffset: int64(binary.BigEndian.Uint64(b[offBeginPhyOffset:])),
		EndPhyOffset:   int64(binary.BigEndian.Uint64(b[offEndPhyOffset:])),
		HashSlotCount:  int32(binary.BigEndian.Uint32(b[offHashSlotCount:])),
		IndexCount:     int32(binary.BigEndian.Uint32(b[offIndexCount:])),
	}, nil
}

// TimeMatched reports whether [begin, end] overlaps the file's [BeginTimestamp, EndTimestamp],
// with IndexFile.isTimeMatched's exact comparisons (an empty query range never matches, and a
// range that only touches an end does).
func (h Header) TimeMatched(begin, end int64) bool {
	return (begin < h.BeginTimestamp && end > h.EndTimestamp) ||
		(begin >= h.BeginTimestamp && begin <= h.EndTimestamp) ||
		(end >= h.BeginTimestamp && end <= h.EndTimestamp)
}
