package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Reply codes, HTTP-like, in error replies and in the refusals of batched acks.
const (
	CodeInvalid     = 400 // invalid input: topic, subject, header, property
	CodeTooLarge    = 413 // body (or the whole record) over the size limit
	CodeInternal    = 500 // anything else
	CodeUnavailable = 503 // store closed, not ready, writes refused, ingress stopped
	CodeDiskFull    = 507 // the disk is full (ENOSPC)
)

// MaxDescription bounds the description of an error reply or of a refusal: errors quote the
// offending input, which can be a header value as large as a payload, and a reply larger than
// the server's max payload could not be sent at all.
const MaxDescription = 1024

// Ack is the reply to a stored message, as JSON:
//
//	{"topic":"orders_eu","queueId":2,"queueOffset":17,"msgId":"7F00000100002A9F0000000000001F40",
//	 "commitLogOffset":8000,"storeTimestamp":1700000000123,"duplicate":false}
//
// MsgID is RocketMQ's offset message id (store host and CommitLog offset, 32 uppercase hex chars
// for an IPv4 store host). A duplicate (same Nats-Msg-Id within the dedupe window) is acked with
// the position of the first copy and Duplicate set; it was not stored again.
type Ack struct {
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queueId"`
	QueueOffset     int64  `json:"queueOffset"`
	MsgID           string `json:"msgId"`
	CommitLogOffset int64  `json:"commitLogOffset"`
	StoreTimestamp  int64  `json:"storeTimestamp"`
	Duplicate       bool   `json:"duplicate"`
}

// ReplyError is the reply to a message that was not stored, as JSON:
//
//	{"error":{"code":413,"description":"commitlog: message body too large: ..."}}
//
// with Code one of the reply codes above. It is an error, so clients can return it as is.
type ReplyError struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// Error returns the code and the description.
func (e *ReplyError) Error() string {
	return fmt.Sprintf("store refused the message (%d): %s", e.Code, e.Description)
}

// reply is either kind on the wire.
type reply struct {
	Ack
	Error *ReplyError `json:"error"`
}

// ParseReply decodes a reply. For an error reply it returns the *ReplyError as the error (use
// errors.As to read the code); a reply that is not JSON is an error too.
func ParseReply(data []byte) (Ack, error) {
	var r reply
	if err := json.Unmarshal(data, &r); err != nil {
		return Ack{}, fmt.Errorf("wire: a reply that is not an ack or an error: %w", err)
	}
	if r.Error != nil {
		return Ack{}, r.Error
	}
	return r.Ack, nil
}

// AppendAck appends a's JSON to dst. It allocates nothing when dst has room: it is on the hot
// path, once per acked message, where encoding/json's reflection would cost an allocation or more.
func AppendAck(dst []byte, a *Ack) []byte { return AppendAckID(dst, a, nil) }

// AppendAckID is AppendAck with the message id given as bytes (hex, so nothing to escape) when
// msgID is not nil, in place of a.MsgID, so that the hot path need not make a string of it.
func AppendAckID(dst []byte, a *Ack, msgID []byte) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, a.Topic)
	dst = append(dst, `,"queueId":`...)
	dst = strconv.AppendInt(dst, int64(a.QueueID), 10)
	dst = append(dst, `,"queueOffset":`...)
	dst = strconv.AppendInt(dst, a.QueueOffset, 10)
	dst = append(dst, `,"msgId":`...)
	if msgID != nil {
		dst = append(dst, '"')
		dst = append(dst, msgID...)
		dst = append(dst, '"')
	} else {
		dst = appendJSONString(dst, a.MsgID)
	}
	dst = append(dst, `,"commitLogOffset":`...)
	dst = strconv.AppendInt(dst, a.CommitLogOffset, 10)
	dst = append(dst, `,"storeTimestamp":`...)
	dst = strconv.AppendInt(dst, a.StoreTimestamp, 10)
	dst = append(dst, `,"duplicate":`...)
	dst = strconv.AppendBool(dst, a.Duplicate)
	return append(dst, '}')
}

// AppendErrorReply appends the JSON of an error reply to dst.
func AppendErrorReply(dst []byte, code int, description string) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"description":`...)
	dst = appendJSONString(dst, description)
	return append(dst, "}}"...)
}

const upperHex = "0123456789ABCDEF"

// appendJSONString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD (descriptions quote client input, which may be
// anything). strconv.AppendQuote is not JSON: its \x01 escapes are not valid JSON.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				switch c {
				case '\n':
					dst = append(dst, '\\', 'n')
				case '\r':
					dst = append(dst, '\\', 'r')
				case '\t':
					dst = append(dst, '\\', 't')
				default:
					dst = append(dst, '\\', 'u', '0', '0', upperHex[c>>4], upperHex[c&0xF])
				}
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
