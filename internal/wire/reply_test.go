package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestReplyJSON(t *testing.T) {
	a := Ack{Topic: "orders_eu", QueueID: 3, QueueOffset: 1 << 40, MsgID: "7F000001000027100000000000001F40",
		CommitLogOffset: 8000, StoreTimestamp: 1700000000123, Duplicate: true}
	data := AppendAck(nil, &a)
	var viaJSON Ack
	if err := json.Unmarshal(data, &viaJSON); err != nil || viaJSON != a {
		t.Fatalf("encoding/json reads %s as %+v, %v", data, viaJSON, err)
	}
	got, err := ParseReply(data)
	if err != nil || got != a {
		t.Fatalf("ParseReply = %+v, %v", got, err)
	}
	if withID := AppendAckID(nil, &Ack{Topic: a.Topic, QueueID: a.QueueID, QueueOffset: a.QueueOffset,
		CommitLogOffset: a.CommitLogOffset, StoreTimestamp: a.StoreTimestamp, Duplicate: true}, []byte(a.MsgID)); string(withID) != string(data) {
		t.Fatalf("AppendAckID %s\nwant %s", withID, data)
	}

	desc := "bad \"header\" \\ \x01\x1f\n\t\xff é \U0001F600"
	data = AppendErrorReply(nil, 400, desc)
	if !json.Valid(data) {
		t.Fatalf("error reply is not JSON: %q", data)
	}
	_, err = ParseReply(data)
	re, ok := errors.AsType[*ReplyError](err)
	if !ok || re.Code != 400 || re.Description != strings.ToValidUTF8(desc, "\uFFFD") {
		t.Fatalf("ParseReply(error) = %v", err)
	}
	if _, err := ParseReply([]byte("not json")); err == nil {
		t.Fatal("garbage parsed")
	}
}

// FuzzParseReply: any bytes either fail or give an Ack or a *ReplyError; an Ack written back
// with AppendAck parses to itself, and so does an error reply.
func FuzzParseReply(f *testing.F) {
	f.Add(AppendAck(nil, &Ack{Topic: "t", QueueID: 1, QueueOffset: 2, MsgID: "AB", CommitLogOffset: 3, StoreTimestamp: 4}))
	f.Add(AppendErrorReply(nil, 413, "too \"large\"\x01"))
	f.Add([]byte(`{"topic":"x","error":null}`))
	f.Add([]byte(`{"error":{}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseReply(data)
		if err != nil {
			if re, ok := errors.AsType[*ReplyError](err); ok {
				again, err2 := ParseReply(AppendErrorReply(nil, re.Code, re.Description))
				if re2, ok := errors.AsType[*ReplyError](err2); again != (Ack{}) || !ok || *re2 != *re {
					t.Fatalf("error reply %+v written back parses as %+v, %v", re, again, err2)
				}
			}
			return
		}
		if again, err := ParseReply(AppendAck(nil, &a)); err != nil || again != a {
			t.Fatalf("ack %+v written back parses as %+v, %v", a, again, err)
		}
	})
}
