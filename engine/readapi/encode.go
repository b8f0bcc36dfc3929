package readapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// decodeRequest decodes a JSON request strictly: unknown fields are refused (a misspelt field,
// "queue" for "queueId", would otherwise silently read queue 0; field names match without
// regard to case, as encoding/json does). An empty body is the zero request.
func decodeRequest(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest{fmt.Errorf("malformed JSON: %w", err)}
	}
	if dec.More() {
		return badRequest{errors.New("malformed JSON: data after the request")}
	}
	return nil
}

// marshal is json.Marshal without HTML escaping (<, >, & stay as they are: smaller replies).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// wireMessage is m on the wire, with its body unless noBody.
func wireMessage(m *reader.Message, noBody bool) api.Message {
	w := api.Message{
		Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset, CommitLogOffset: m.PhysicalOffset,
		Size: m.Size, MsgID: m.MsgID, StoreTimestamp: m.StoreTimestamp, BornTimestamp: m.BornTimestamp,
		BornHost: hostString(m.BornHost), StoreHost: hostString(m.StoreHost),
		Tags: m.Tags, Keys: m.Keys, UniqKey: m.UniqKey, Properties: m.Properties,
		Body: m.Body, BodySize: len(m.Body),
	}
	if w.Properties == nil {
		w.Properties = commitlog.Properties(m.RawProperties).Map()
	}
	if w.Body == nil {
		w.Body = []byte{}
	}
	if noBody {
		w.Body, w.Partial = []byte{}, len(m.Body) > 0
	}
	return w
}

func hostString(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// messageList encodes msgs, in order, into a JSON array that fits in room bytes, measuring
// each. A message too large for any reply (more than perMsg bytes) is encoded without its body.
// It returns the array and how many messages it holds.
func messageList(msgs []reader.Message, room, perMsg int) ([]byte, int, error) {
	out := append(make([]byte, 0, min(room, 64<<10)), '[')
	n := 0
	for i := range msgs {
		raw, err := marshal(wireMessage(&msgs[i], false))
		if err == nil && len(raw) > perMsg {
			raw, err = marshal(wireMessage(&msgs[i], true))
			if err == nil && len(raw) > perMsg {
				err = fmt.Errorf("message %s: %d bytes without its body, more than a reply may hold (%d): "+
					"raise the server's max_payload", msgs[i].MsgID, len(raw), perMsg)
			}
		}
		if err != nil {
			return nil, 0, err
		}
		if len(out)+1+len(raw)+1 > room {
			break
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		n++
	}
	return append(out, ']'), n, nil
}

// withMessages writes the reply {"messages":<list>, ...envelope's fields}.
func withMessages(list []byte, envelope any) ([]byte, error) {
	env, err := marshal(envelope)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(list)+len(env)+16)
	out = append(out, `{"messages":`...)
	out = append(out, list...)
	if len(env) > 2 {
		out = append(out, ',')
	}
	return append(out, env[1:]...), nil
}

// getEnvelope is GetReply but for its messages.
type getEnvelope struct {
	Status      string  `json:"status"`
	NextOffset  int64   `json:"nextOffset"`
	MinOffset   int64   `json:"minOffset"`
	MaxOffset   int64   `json:"maxOffset"`
	Truncated   bool    `json:"truncated,omitempty"`
	WaitSkipped bool    `json:"waitSkipped,omitempty"`
	ScanStopped bool    `json:"scanStopped,omitempty"`
	Applied     applied `json:"applied,omitempty"`
}
