package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// BatchAck is a batched ack on the wire (docs/BATCHED-ACKS.md), compact JSON:
//
//	{"stream":"k3Jx9","stored":[{"topic":"orders_eu","queueId":2,"queueOffset":500,"seq":1001,
//	 "count":3,"step":4}],"refused":[{"seq":1002,"count":1,"code":413,"description":"..."}],
//	 "missing":[[1003,1004]],"through":1001}
//
// Stored: the runs of messages stored since the stream's last ack (run i is Count messages of
// one queue, at queue offsets QueueOffset, QueueOffset+1..., with sequences Seq, Seq+Step...;
// Dup: answered with the first copy's position, not stored again). Refused: runs of consecutive
// sequences not stored, with the reply code and reason. Missing: inclusive ranges of sequences
// that never reached the engine: resend them. Through: every sequence up to it is stored at the
// promised level (its position in this ack or an earlier one), or lies at or below the
// publisher's floor. Error: the stream as a whole (503: evicted from the stream table; its
// unanswered sequences must be resent). Empty lists are left out; Through is last, so that an
// ack split in parts can say in each part how far it goes (BatchAckWriter).
type BatchAck struct {
	Stream  string       `json:"stream"`
	Stored  []StoredRun  `json:"stored,omitempty"`
	Refused []RefusedRun `json:"refused,omitempty"`
	Missing [][2]uint64  `json:"missing,omitempty"`
	Error   *ReplyError  `json:"error,omitempty"`
	Through uint64       `json:"through"`
}

// StoredRun is a run of stored messages of one queue (see BatchAck).
type StoredRun struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	Seq         uint64 `json:"seq"`
	Count       uint64 `json:"count"`
	Step        uint64 `json:"step"`
	Dup         bool   `json:"dup,omitempty"`
}

// RefusedRun is a run of consecutive refused sequences (see BatchAck).
type RefusedRun struct {
	Seq         uint64 `json:"seq"`
	Count       uint64 `json:"count"`
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// ErrPlainReply: what came on a stream's ack subject is a plain reply (an Ack or an error reply,
// which an engine without batched acks, or one that refused the header, sends), not a batched
// ack.
var ErrPlainReply = errors.New("a plain reply, not a batched ack")

// ParseBatchAck decodes a batched ack into a new BatchAck (see DecodeBatchAck).
func ParseBatchAck(data []byte) (BatchAck, error) {
	var a BatchAck
	err := DecodeBatchAck(data, &a)
	return a, err
}

// DecodeBatchAck decodes a batched ack into a, reusing its lists. A plain reply (no stream) is
// an error wrapping ErrPlainReply, with the engine's error when it is one; anything that is not
// JSON is another error.
func DecodeBatchAck(data []byte, a *BatchAck) error {
	// Reuse the lists, zeroed: json decodes into the elements in place, and keeps the fields an
	// element leaves out (dup is left out when false).
	clear(a.Stored[:cap(a.Stored)])
	clear(a.Refused[:cap(a.Refused)])
	*a = BatchAck{Stored: a.Stored[:0], Refused: a.Refused[:0], Missing: a.Missing[:0]}
	if err := json.Unmarshal(data, a); err != nil {
		return fmt.Errorf("an ack that is not JSON: %w (%.200q)", err, data)
	}
	if a.Stream == "" {
		if a.Error != nil {
			return fmt.Errorf("%w: the engine answered %d: %s", ErrPlainReply, a.Error.Code, a.Error.Description)
		}
		return fmt.Errorf("%w (%.200q): the engine does not speak the batched-ack protocol", ErrPlainReply, data)
	}
	return nil
}

// The lists of a batched ack (BatchAckWriter.Add).
const (
	SectionStored  = "stored"
	SectionRefused = "refused"
	SectionMissing = "missing"
)

// BatchAckWriter writes a batched ack's JSON piece by piece, allocating nothing once its buffer
// has grown, so that the engine can encode one ack per stream per round and cut a long one in
// parts: Begin, then Add items (AppendStoredRun, AppendRefusedRun, AppendMissing) in section
// order, or Error, then Finish.
type BatchAckWriter struct {
	buf     []byte
	section string // the list being written, "" before the first
	items   int    // items in the ack being written
}

// Begin starts the ack of stream.
func (w *BatchAckWriter) Begin(stream string) {
	w.section, w.items = "", 0
	w.buf = append(w.buf[:0], `{"stream":`...)
	w.buf = appendJSONString(w.buf, stream)
}

// Len is the length of the ack so far; Items the items added since Begin.
func (w *BatchAckWriter) Len() int   { return len(w.buf) }
func (w *BatchAckWriter) Items() int { return w.items }

// Add appends item, a JSON value, to the list section (one of the Section constants).
func (w *BatchAckWriter) Add(section string, item []byte) {
	if w.section != section {
		if w.section != "" {
			w.buf = append(w.buf, ']')
		}
		w.buf = append(w.buf, ',', '"')
		w.buf = append(w.buf, section...)
		w.buf = append(w.buf, '"', ':', '[')
		w.section = section
	} else {
		w.buf = append(w.buf, ',')
	}
	w.buf = append(w.buf, item...)
	w.items++
}

// Error sets the stream's error (after Begin, instead of any list).
func (w *BatchAckWriter) Error(code int, description string) {
	w.buf = append(w.buf, `,"error":{"code":`...)
	w.buf = strconv.AppendInt(w.buf, int64(code), 10)
	w.buf = append(w.buf, `,"description":`...)
	w.buf = appendJSONString(w.buf, description)
	w.buf = append(w.buf, '}')
}

// Finish closes the ack with through and returns it, valid until the next Begin.
func (w *BatchAckWriter) Finish(through uint64) []byte {
	if w.section != "" {
		w.buf = append(w.buf, ']')
	}
	w.buf = append(w.buf, `,"through":`...)
	w.buf = strconv.AppendUint(w.buf, through, 10)
	w.buf = append(w.buf, '}')
	return w.buf
}

// AppendStoredRun appends r's JSON (an item of SectionStored).
func AppendStoredRun(dst []byte, r *StoredRun) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, r.Topic)
	dst = append(dst, `,"queueId":`...)
	dst = strconv.AppendInt(dst, int64(r.QueueID), 10)
	dst = append(dst, `,"queueOffset":`...)
	dst = strconv.AppendInt(dst, r.QueueOffset, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, r.Count, 10)
	dst = append(dst, `,"step":`...)
	dst = strconv.AppendUint(dst, r.Step, 10)
	if r.Dup {
		dst = append(dst, `,"dup":true`...)
	}
	return append(dst, '}')
}

// AppendRefusedRun appends r's JSON (an item of SectionRefused).
func AppendRefusedRun(dst []byte, r *RefusedRun) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, r.Count, 10)
	dst = append(dst, `,"code":`...)
	dst = strconv.AppendInt(dst, int64(r.Code), 10)
	dst = append(dst, `,"description":`...)
	dst = appendJSONString(dst, r.Description)
	return append(dst, '}')
}

// AppendMissing appends the inclusive range r's JSON (an item of SectionMissing).
func AppendMissing(dst []byte, r [2]uint64) []byte {
	dst = append(dst, '[')
	dst = strconv.AppendUint(dst, r[0], 10)
	dst = append(dst, ',')
	dst = strconv.AppendUint(dst, r[1], 10)
	return append(dst, ']')
}
