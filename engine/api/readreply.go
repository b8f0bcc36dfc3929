package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// The batched read's reply (endpoint read; docs/GROUPS.md, "The batched read's reply"): a
// header block, then one section per queue asked, each with the queue's records as the CommitLog
// holds them, back to back.

// Headers of a batched read's reply.
const (
	// HeaderReadStatus is OK, or ERROR with HeaderErrorCode and HeaderError.
	HeaderReadStatus = "Rs-Read-Status"
	HeaderErrorCode  = "Rs-Error-Code"
	HeaderError      = "Rs-Error"
)

// ReadMagic starts the body of a batched read's reply.
const ReadMagic = "RSR1"

// readSectionHeader is the size of a section's fixed part.
const readSectionHeader = 4 + 1 + 8 + 8 + 8 + 4 + 4

// ReadStatus is a section's status.
type ReadStatus uint8

// Section statuses: the get statuses, then the batched read's own.
const (
	ReadFound ReadStatus = iota
	ReadNoMatchedMessage
	ReadNoMessageInQueue
	ReadOffsetTooSmall
	ReadOffsetOverflowOne
	ReadOffsetOverflowBadly
	ReadOffsetFoundNull
	// ReadFenced: the member does not hold the queue at the epoch it named.
	ReadFenced
	// ReadTooLarge: the record at NextOffset does not fit in a reply; read it with msg.
	ReadTooLarge
)

var readStatusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL",
	"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL", "FENCED", "TOO_LARGE"}

func (s ReadStatus) String() string {
	if int(s) < len(readStatusNames) {
		return readStatusNames[s]
	}
	return "ReadStatus(" + strconv.Itoa(int(s)) + ")"
}

// ReadSection is one queue's part of a batched read's reply.
type ReadSection struct {
	QueueID int32
	Status  ReadStatus
	// NextOffset is where to read the queue from next; MinOffset and MaxOffset its bounds
	// (MaxOffset exclusive: the offset of its next message).
	NextOffset, MinOffset, MaxOffset int64
	// Count records in Data, back to back, exactly as stored (Records iterates them).
	Count int
	Data  []byte
}

// AppendReadSection appends a section (its Count records back to back in Data) to b, which
// starts with ReadMagic.
func AppendReadSection(b []byte, s ReadSection) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(s.QueueID))
	b = append(b, byte(s.Status))
	b = binary.BigEndian.AppendUint64(b, uint64(s.NextOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(s.MinOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(s.MaxOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(s.Count))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Data)))
	return append(b, s.Data...)
}

// PutReadSectionHeader writes a section's fixed part into dst (ReadSectionHeader bytes, just
// before its Data in a body made in place): as AppendReadSection, without copying Data.
func PutReadSectionHeader(dst []byte, s ReadSection) {
	binary.BigEndian.PutUint32(dst, uint32(s.QueueID))
	dst[4] = byte(s.Status)
	binary.BigEndian.PutUint64(dst[5:], uint64(s.NextOffset))
	binary.BigEndian.PutUint64(dst[13:], uint64(s.MinOffset))
	binary.BigEndian.PutUint64(dst[21:], uint64(s.MaxOffset))
	binary.BigEndian.PutUint32(dst[29:], uint32(s.Count))
	binary.BigEndian.PutUint32(dst[33:], uint32(len(s.Data)))
}

// ReadSectionHeader is the size of a section's fixed part.
const ReadSectionHeader = readSectionHeader

// ErrMalformedRead is wrapped by ParseReadReply's errors about the body.
var ErrMalformedRead = errors.New("api: malformed batched read reply")

// ParseReadReply decodes a batched read's reply: its sections, or the *Error it carries. The
// sections' Records are views of m.Data. Every record is checked to be whole (its length and
// fields) as Records iterates it, not here.
func ParseReadReply(m *nats.Msg) ([]ReadSection, error) {
	if m.Header.Get(HeaderReadStatus) != "OK" {
		code, _ := strconv.Atoi(m.Header.Get(HeaderErrorCode))
		if code == 0 {
			if code, _ = strconv.Atoi(m.Header.Get("Nats-Service-Error-Code")); code == 0 {
				code = CodeInternal
			}
		}
		desc := m.Header.Get(HeaderError)
		if desc == "" {
			desc = m.Header.Get("Nats-Service-Error")
		}
		return nil, &Error{Code: code, Description: desc}
	}
	return ParseReadBody(m.Data)
}

// ParseReadBody decodes the body of a batched read's reply.
func ParseReadBody(b []byte) ([]ReadSection, error) {
	if len(b) < len(ReadMagic) || string(b[:len(ReadMagic)]) != ReadMagic {
		return nil, fmt.Errorf("%w: no %s at the start", ErrMalformedRead, ReadMagic)
	}
	b = b[len(ReadMagic):]
	var out []ReadSection
	for len(b) > 0 {
		if len(b) < readSectionHeader {
			return nil, fmt.Errorf("%w: a section of %d bytes, less than its %d-byte header", ErrMalformedRead, len(b), readSectionHeader)
		}
		s := ReadSection{
			QueueID:    int32(binary.BigEndian.Uint32(b)),
			Status:     ReadStatus(b[4]),
			NextOffset: int64(binary.BigEndian.Uint64(b[5:])),
			MinOffset:  int64(binary.BigEndian.Uint64(b[13:])),
			MaxOffset:  int64(binary.BigEndian.Uint64(b[21:])),
			Count:      int(binary.BigEndian.Uint32(b[29:])),
		}
		n := int64(binary.BigEndian.Uint32(b[33:]))
		b = b[readSectionHeader:]
		if n > int64(len(b)) || int64(s.Count) > n/commitlog.MinRecordLen+1 {
			return nil, fmt.Errorf("%w: queue %d: %d records in %d bytes, with %d left", ErrMalformedRead, s.QueueID, s.Count, n, len(b))
		}
		s.Data, b = b[:n], b[n:]
		out = append(out, s)
	}
	return out, nil
}

// Records iterates the section's records. A record that does not parse, or a count that does
// not match the bytes, ends the iteration with an error wrapping ErrMalformedRead.
func (s ReadSection) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		b := s.Data
		for i := range s.Count {
			v, err := commitlog.Parse(b)
			if err != nil {
				yield(Record{}, fmt.Errorf("%w: queue %d, record %d of %d: %w", ErrMalformedRead, s.QueueID, i, s.Count, err))
				return
			}
			if !yield(Record{v: v}, nil) {
				return
			}
			b = b[v.TotalSize():]
		}
		if len(b) != 0 {
			yield(Record{}, fmt.Errorf("%w: queue %d: %d bytes after its %d records", ErrMalformedRead, s.QueueID, len(b), s.Count))
		}
	}
}

// Record is one message as the CommitLog holds it (a view of a batched read's reply: valid as
// long as the reply is reachable).
type Record struct {
	v commitlog.View
}

// Bytes are the record's bytes, as stored.
func (r Record) Bytes() []byte { return r.v.Bytes() }

// Topic, QueueID and QueueOffset say where the message is.
func (r Record) Topic() string      { return string(r.v.Topic()) }
func (r Record) QueueID() int32     { return r.v.QueueID() }
func (r Record) QueueOffset() int64 { return r.v.QueueOffset() }

// CommitLogOffset is the record's physical offset.
func (r Record) CommitLogOffset() int64 { return r.v.PhysicalOffset() }

// StoreTimestamp and BornTimestamp are in ms.
func (r Record) StoreTimestamp() int64 { return r.v.StoreTimestamp() }
func (r Record) BornTimestamp() int64  { return r.v.BornTimestamp() }

// MsgID is RocketMQ's offset message id (store host and CommitLog offset).
func (r Record) MsgID() string { return string(r.v.AppendOffsetMsgID(nil)) }

// Body is the body as stored (a view).
func (r Record) Body() []byte { return r.v.Body() }

// SysFlag and Flag are RocketMQ's (bit 0 of SysFlag: a zlib body, from RocketMQ's producers).
func (r Record) SysFlag() int32 { return r.v.SysFlag() }
func (r Record) Flag() int32    { return r.v.Flag() }

// Property returns a property's value (the last, if repeated).
func (r Record) Property(name string) (string, bool) {
	v, ok := r.v.Properties().Get(name)
	return string(v), ok
}

// Subject is the NATS subject the message came on ("" for one not from NATS).
func (r Record) Subject() string { s, _ := r.Property("NATS_SUBJECT"); return s }

// UniqKey is the message's id: its Nats-Msg-Id, or one the engine made.
func (r Record) UniqKey() string { s, _ := r.Property(commitlog.PropUniqKey); return s }

// Keys and Tags are the KEYS and TAGS properties.
func (r Record) Keys() string { s, _ := r.Property(commitlog.PropKeys); return s }
func (r Record) Tags() string { s, _ := r.Property(commitlog.PropTags); return s }

// Properties returns every property (a repeated name keeps its last value).
func (r Record) Properties() map[string]string {
	out := make(map[string]string)
	it := r.v.Properties().Iter()
	for {
		n, v, ok := it.Next()
		if !ok {
			return out
		}
		out[string(n)] = string(v)
	}
}

// Message is the record as the read API's other replies carry a message (get --json's shape).
func (r Record) Message() Message {
	body := r.v.Body()
	m := Message{Topic: r.Topic(), QueueID: r.QueueID(), QueueOffset: r.QueueOffset(), CommitLogOffset: r.CommitLogOffset(),
		Size: int32(r.v.TotalSize()), MsgID: r.MsgID(), StoreTimestamp: r.StoreTimestamp(), BornTimestamp: r.BornTimestamp(),
		Tags: r.Tags(), Keys: r.Keys(), UniqKey: r.UniqKey(), Properties: r.Properties(), Body: body, BodySize: len(body)}
	if h := r.v.BornHost(); h.IsValid() {
		m.BornHost = h.String()
	}
	if h := r.v.StoreHost(); h.IsValid() {
		m.StoreHost = h.String()
	}
	return m
}
