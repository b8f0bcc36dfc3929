package api

import (
	"strconv"

	"github.com/nats-io/nats.go"
)

// Headers of replayed messages. Besides these, a replayed message carries its original NATS
// headers, rebuilt from the record's properties:
//
//   - every property stored from a header, under the header's name (a header's second and later
//     values, stored as name#2, name#3..., become its further values);
//   - UNIQ_KEY as Nats-Msg-Id when it came from one, else as Rs-Uniq-Key (a UNIQ_KEY the engine
//     generated, or a record that did not come through NATS ingress);
//   - KEYS as the keys header and TAGS as the tags header (Rmq-Keys and Rmq-Tags by default:
//     the engine's NATSOptions.KeysHeader and TagsHeader);
//   - NATS_SUBJECT, the subject the message was published on, as Rs-Subject.
//
// Other properties the store sets (__CRC32#, CLUSTER...) are left out.
const (
	HeaderTopic          = "Rs-Topic"
	HeaderQueueID        = "Rs-Queue-Id"
	HeaderQueueOffset    = "Rs-Queue-Offset"
	HeaderMsgID          = "Rs-Msg-Id"
	HeaderStoreTimestamp = "Rs-Store-Timestamp"
	HeaderSubject        = "Rs-Subject"
	HeaderUniqKey        = "Rs-Uniq-Key"

	// HeaderReplayID names the replay (ReplayReply.ReplayID); on every message of it.
	HeaderReplayID = "Rs-Replay-Id"
	// HeaderReplaySeq numbers a replay's messages 1, 2, ...; a message sent again keeps its
	// number, so a receiver can drop the copies. The end message has the next number.
	HeaderReplaySeq = "Rs-Replay-Seq"
	// HeaderReplayRedelivered is on a message sent again (acked mode): how many times before.
	HeaderReplayRedelivered = "Rs-Replay-Redelivered"
	// HeaderReplayEnd ("true") marks the last message of a replay; it has no body.
	HeaderReplayEnd = "Rs-Replay-End"
	// HeaderReplayCount, on the end message, is the number of messages the replay sent
	// (not counting copies sent again).
	HeaderReplayCount = "Rs-Replay-Count"
	// HeaderReplayError, on the end message of a replay that failed or was stopped, says why.
	HeaderReplayError = "Rs-Replay-Error"
)

// ReplayEnd is what the end message of a replay says.
type ReplayEnd struct {
	ReplayID string
	// Count is the number of messages sent.
	Count int64
	// Error is "" for a replay that sent everything (and, acked, had everything acked).
	Error string
}

// ParseReplayEnd reports whether m is the end message of a replay, and what it says.
func ParseReplayEnd(m *nats.Msg) (ReplayEnd, bool) {
	if m == nil || m.Header.Get(HeaderReplayEnd) != "true" {
		return ReplayEnd{}, false
	}
	n, _ := strconv.ParseInt(m.Header.Get(HeaderReplayCount), 10, 64)
	return ReplayEnd{ReplayID: m.Header.Get(HeaderReplayID), Count: n, Error: m.Header.Get(HeaderReplayError)}, true
}
