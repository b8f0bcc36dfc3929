package engine

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
)

// Message is a message to store with Put: the library form of what ingress builds from a NATS
// message.
type Message struct {
	Topic   string
	QueueID int32
	Body    []byte
	// Tags becomes TAGS (the tag code; in a topic under the subject-tag rule, the NATS_SUBJECT
	// property, which Tags must be or leave empty); Keys become KEYS (indexed).
	Tags string
	Keys []string
	// MsgID becomes UNIQ_KEY (indexed) and is the dedupe key.
	MsgID string
	// Properties are stored as they are, in name order.
	Properties map[string]string
	// BornTimestamp is the producer's clock (ms); 0 means now.
	BornTimestamp int64
}

// Result is where a message went. Err is set when it was not stored.
type Result struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64
	PhysOffset     int64
	Size           int32
	StoreTimestamp int64
	// MsgID is RocketMQ's offset message id (store host + physical offset).
	MsgID     string
	Duplicate bool
	Err       error
}

// Encode turns a Message into a record for Submit, with the engine's encoding options.
func (e *Engine) Encode(m *Message) (stages.Record, error) {
	var props []byte
	if m.MsgID != "" {
		props = commitlog.AppendProperty(props, commitlog.PropUniqKey, m.MsgID)
	}
	tags, err := e.reader.SubjectTags().TagsOf(m.Topic, m.Tags, m.Properties[natssubject.Property])
	if err != nil {
		return stages.Record{}, err
	}
	if tags != "" {
		props = commitlog.AppendProperty(props, commitlog.PropTags, tags)
	}
	if len(m.Keys) > 0 {
		props = commitlog.AppendProperty(props, commitlog.PropKeys, strings.Join(m.Keys, string(commitlog.KeySeparator)))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
		if err := commitlog.CheckProperty(k, m.Properties[k]); err != nil {
			return stages.Record{}, err
		}
		props = commitlog.AppendProperty(props, k, m.Properties[k])
	}
	born := m.BornTimestamp
	if born == 0 {
		born = e.opts.Now().UnixMilli()
	}
	cm := commitlog.Message{
		Topic: m.Topic, QueueID: m.QueueID, BornTimestamp: born,
		BornHost: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), StoreHost: e.opts.StoreHost,
		Body: m.Body, Properties: props,
	}
	rec, err := commitlog.AppendRecord(nil, &cm, commitlog.EncodeOptions{PropCRC: !e.opts.NoPropCRC, MaxBodySize: e.opts.MaxBodySize})
	if err != nil {
		return stages.Record{}, err
	}
	return stages.Record{Bytes: rec, Topic: m.Topic, QueueID: m.QueueID, PropCRC: !e.opts.NoPropCRC, MsgID: m.MsgID}, nil
}

// Put stores msgs as one batch and returns once each is acknowledged at the engine's flush
// mode (sync: on disk; async: written) or failed. A message that cannot be encoded fails alone.
func (e *Engine) Put(ctx context.Context, msgs ...Message) ([]Result, error) {
	b := &stages.Batch{Records: make([]stages.Record, len(msgs))}
	for i := range msgs {
		r, err := e.Encode(&msgs[i])
		if err != nil {
			r = stages.Record{Topic: msgs[i].Topic, QueueID: msgs[i].QueueID, Err: err}
		}
		b.Records[i] = r
	}
	done := make(chan struct{})
	b.Done = func(*stages.Batch) { close(done) }
	if err := e.Submit(ctx, b); err != nil {
		return nil, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := make([]Result, len(b.Records))
	for i := range b.Records {
		out[i] = e.result(&b.Records[i])
	}
	return out, nil
}

func (e *Engine) result(r *stages.Record) Result {
	res := Result{
		Topic: r.Topic, QueueID: r.QueueID, QueueOffset: r.QueueOffset, PhysOffset: r.PhysOffset,
		Size: r.Size, StoreTimestamp: r.StoreTimestamp, Duplicate: r.Duplicate, Err: r.Err,
	}
	if r.Err == nil {
		res.MsgID = commitlog.OffsetMsgID(e.opts.StoreHost, r.PhysOffset)
	}
	return res
}
