package ingress

import (
	"encoding/json"
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
// sequences not stored, with the reply code and reason (the codes of ReplyCode). Missing:
// inclusive ranges of sequences that never reached the engine: resend them. Through: every
// sequence up to it is stored at the promised level (its position in this ack or an earlier one),
// or lies at or below the publisher's floor. Error: the stream as a whole (503: evicted from the
// stream table; its unanswered sequences must be resent). Empty lists are left out; Through is
// last, so that an ack split in parts (at BatchedConfig.MaxAckBytes) can say in each part how
// far it goes.
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

// ParseBatchAck decodes a batched ack; a plain reply (an Ack or an error reply, which an engine
// with batched acks off sends) is an error.
func ParseBatchAck(data []byte) (BatchAck, error) {
	var a BatchAck
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("ingress: not a batched ack: %w", err)
	}
	if a.Stream == "" {
		return a, fmt.Errorf("ingress: not a batched ack (no stream): %.200s", data)
	}
	return a, nil
}

// ackWriter encodes a stream's news as one ack message, or several when it is longer than
// MaxAckBytes. Owned by the tracker goroutine; its buffers are reused.
type ackWriter struct {
	t       *tracker
	s       *stream
	buf     []byte
	item    []byte
	missing [][2]uint64
	section string // the list being written, "" before the first
	items   int    // items in the message being written
}

// write publishes s's news.
func (w *ackWriter) write(s *stream) {
	w.begin(s)
	for i := range s.runs {
		w.item = appendStoredRun(w.item[:0], &s.runs[i])
		w.add("stored")
	}
	for i := range s.refusals {
		w.item = appendRefusedRun(w.item[:0], &s.refusals[i])
		w.add("refused")
	}
	w.missing = s.missing(w.missing[:0], maxMissingRanges)
	for _, r := range w.missing {
		w.item = append(w.item[:0], '[')
		w.item = strconv.AppendUint(w.item, r[0], 10)
		w.item = append(w.item, ',')
		w.item = strconv.AppendUint(w.item, r[1], 10)
		w.item = append(w.item, ']')
		w.add("missing")
		w.t.counters.missing.Add(int64(r[1] - r[0] + 1))
	}
	w.finish(s.through)
}

// evicted tells s's publisher that its stream was dropped from the table.
func (w *ackWriter) evicted(s *stream) {
	w.begin(s)
	w.buf = append(w.buf, `,"error":{"code":`...)
	w.buf = strconv.AppendInt(w.buf, CodeUnavailable, 10)
	w.buf = append(w.buf, `,"description":`...)
	w.buf = appendJSONString(w.buf, fmt.Sprintf(
		"stream evicted: the engine tracks at most %d streams; nothing was lost: what is still unanswered is answered as it is stored, or resent on its timeout", w.t.cfg.MaxStreams))
	w.buf = append(w.buf, '}')
	w.finish(s.sentThrough)
}

func (w *ackWriter) begin(s *stream) {
	w.s, w.section, w.items = s, "", 0
	w.buf = append(w.buf[:0], `{"stream":`...)
	w.buf = appendJSONString(w.buf, s.id)
}

// add appends w.item to the list section, first sending the message so far if the item would
// take it past the limit.
func (w *ackWriter) add(section string) {
	if w.items > 0 && len(w.buf)+len(w.item)+64 > w.t.cfg.MaxAckBytes {
		w.finish(w.s.sentThrough) // the positions of this part do not reach the new through
		w.begin(w.s)
	}
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
	w.buf = append(w.buf, w.item...)
	w.items++
}

// finish closes the message with through and publishes it.
func (w *ackWriter) finish(through uint64) {
	if w.section != "" {
		w.buf = append(w.buf, ']')
	}
	w.buf = append(w.buf, `,"through":`...)
	w.buf = strconv.AppendUint(w.buf, through, 10)
	w.buf = append(w.buf, '}')
	w.t.send(w.s.ackTo, w.buf)
}

func appendStoredRun(dst []byte, r *storedRun) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, r.topic)
	dst = append(dst, `,"queueId":`...)
	dst = strconv.AppendInt(dst, int64(r.queueID), 10)
	dst = append(dst, `,"queueOffset":`...)
	dst = strconv.AppendInt(dst, r.queueOffset, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, r.seq, 10)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, r.count, 10)
	dst = append(dst, `,"step":`...)
	dst = strconv.AppendUint(dst, r.step, 10)
	if r.dup {
		dst = append(dst, `,"dup":true`...)
	}
	return append(dst, '}')
}

func appendRefusedRun(dst []byte, r *refusedRun) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, r.seq, 10)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, r.count, 10)
	dst = append(dst, `,"code":`...)
	dst = strconv.AppendInt(dst, int64(r.code), 10)
	dst = append(dst, `,"description":`...)
	dst = appendJSONString(dst, r.desc)
	return append(dst, '}')
}
