package publisher

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The wire protocol (docs/BATCHED-ACKS.md). This package depends on nats.go only; the engine's
// side of the protocol is stages/ingress (batched.go, batchack.go), and a test in this package
// holds the two together.

// HeaderSeq is the header every message of a stream carries:
//
//	Rs-Seq: <stream> <seq> <acked>[ r]
//
// stream is the stream id (1 to 64 bytes of [A-Za-z0-9_-]), seq the message's sequence number
// (1, 2, 3... in publish order), acked the publisher's floor (every sequence up to it has been
// answered to the publisher), and r marks a resend. The message's reply subject is the stream's
// ack subject.
const HeaderSeq = "Rs-Seq"

// MaxStreamID bounds a stream id's length.
const MaxStreamID = 64

// appendSeqHeader appends the value of the Rs-Seq header.
func appendSeqHeader(dst []byte, stream string, seq, floor uint64, resend bool) []byte {
	dst = append(dst, stream...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, floor, 10)
	if resend {
		dst = append(dst, " r"...)
	}
	return dst
}

// validStreamID says whether s may be a stream id.
func validStreamID(s string) bool {
	if len(s) == 0 || len(s) > MaxStreamID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// wireAck is an ack as the engine sends it (see docs/BATCHED-ACKS.md):
//
//	{"stream":"k3Jx9","stored":[{"topic":"orders_eu","queueId":2,"queueOffset":500,"seq":1001,
//	 "count":3,"step":4}],"refused":[{"seq":1002,"count":1,"code":413,"description":"..."}],
//	 "missing":[[1003,1004]],"through":1001}
type wireAck struct {
	Stream  string       `json:"stream"`
	Stored  []wireStored `json:"stored"`
	Refused []wireRefuse `json:"refused"`
	Missing [][2]uint64  `json:"missing"`
	Error   *wireError   `json:"error"`
	Through uint64       `json:"through"`

	// A plain reply (an engine without batched acks, or one that refused the header) has these.
	Topic string `json:"topic"`
}

type wireStored struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	Seq         uint64 `json:"seq"`
	Count       uint64 `json:"count"`
	Step        uint64 `json:"step"`
	Dup         bool   `json:"dup"`
}

type wireRefuse struct {
	Seq         uint64 `json:"seq"`
	Count       uint64 `json:"count"`
	Code        int    `json:"code"`
	Description string `json:"description"`
}

type wireError struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// errPlainReply: what came on the ack subject is a plain reply, not a batched ack.
var errPlainReply = errors.New("a plain reply, not a batched ack")

// parseAck decodes an ack. A plain reply ({"topic":...} or {"error":...} without a stream) is
// errPlainReply, with the engine's error when it is one.
func parseAck(data []byte, a *wireAck) error {
	// Reuse the lists, zeroed: json decodes into the elements in place, and keeps the fields an
	// element leaves out (dup is left out when false).
	clear(a.Stored[:cap(a.Stored)])
	clear(a.Refused[:cap(a.Refused)])
	*a = wireAck{Stored: a.Stored[:0], Refused: a.Refused[:0], Missing: a.Missing[:0]}
	if err := json.Unmarshal(data, a); err != nil {
		return fmt.Errorf("publisher: an ack that is not JSON: %w (%.200q)", err, data)
	}
	if a.Stream == "" {
		if a.Error != nil {
			return fmt.Errorf("%w: the engine answered %d: %s", errPlainReply, a.Error.Code, a.Error.Description)
		}
		return fmt.Errorf("%w (%.200q): the engine does not speak the batched-ack protocol", errPlainReply, data)
	}
	return nil
}
