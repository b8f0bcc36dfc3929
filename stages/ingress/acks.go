package ingress

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// done is every batch's Done, for core NATS messages: the ack stage calls it once the batch's
// records have reached the promised durability (or failed). It publishes one reply per record
// that has a reply subject: an Ack, or an error with the code of ReplyCode(Record.Err), and hands
// the batch to the tracker when it holds batched records. It does not wait for the server:
// nats.go's Publish buffers, and writes to the socket itself only when its buffer is full. Safe
// to call from any goroutine.
func (c *coreSource) done(b *stages.Batch) {
	in := c.in
	bufp := in.replyBufs.Get().(*[]byte)
	buf := *bufp
	tracked := false
	for i := range b.Records {
		r := &b.Records[i]
		switch c := r.Ctx.(type) {
		case *batched.Meta:
			// A batched-ack stream's: the tracker answers it (package batched).
			tracked = true
			if r.Err != nil && !c.Rejected && r.Err != errHeldAtAbort && !batched.IsStoredBefore(r.Err) {
				in.counters.failed[codeIndex(ReplyCode(r.Err))].Add(1)
			}
			continue
		case *batched.Marker:
			tracked = true
			continue
		case fence:
			close(c) // every record the worker took before the fence is past the ack stage
			continue
		}
		if r.Err != nil {
			code := ReplyCode(r.Err)
			if r.Err == errHeldAtAbort {
				in.replyError(r.Reply, code, r.Err.Error())
				continue
			}
			in.counters.failed[codeIndex(code)].Add(1)
			if ok, held := in.failLog.Allow(time.Now()); ok {
				in.log.Warn().Err(r.Err).Int("code", code).Str("topic", r.Topic).Int64("more", held).
					Msg("ingress: the store did not take a message")
			}
			in.replyError(r.Reply, code, r.Err.Error())
			continue
		}
		if r.Reply == "" || in.cfg.NoReply {
			continue
		}
		buf = appendRecordAck(buf[:0], r, in.cfg.StoreHost)
		in.publishReply(r.Reply, buf, &in.counters.acks)
	}
	*bufp = buf[:0]
	in.replyBufs.Put(bufp)
	if tracked {
		in.tracker.Offer(b) // the tracker recycles it
	} else {
		in.recycle(b)
	}
}

// appendRecordAck appends the Ack JSON of an appended record, writing the offset message id
// straight into the JSON so that no string is made for it.
func appendRecordAck(dst []byte, r *stages.Record, storeHost netip.AddrPort) []byte {
	var id [commitlog.OffsetMsgIDLenV6]byte
	a := wire.Ack{
		Topic:           r.Topic,
		QueueID:         r.QueueID,
		QueueOffset:     r.QueueOffset,
		CommitLogOffset: r.PhysOffset,
		StoreTimestamp:  r.StoreTimestamp,
		Duplicate:       r.Duplicate,
	}
	return wire.AppendAckID(dst, &a, commitlog.AppendOffsetMsgID(id[:0], storeHost, r.PhysOffset))
}

// reject answers a message ingress refused, as its source does, and counts it; it never
// reaches Out.
func (in *Ingress) reject(m *nats.Msg, err error) {
	in.src.refuse(m, in.noteReject(m.Subject, err), err)
}

// noteReject counts and logs a message ingress refused, and returns its code: one debug line
// per reject (only a level check when the logger is above debug; see engine.LevelWriter) and a
// warning at most once per LogInterval.
func (in *Ingress) noteReject(subject string, err error) int {
	code := ReplyCode(err)
	in.counters.rejected[codeIndex(code)].Add(1)
	if ev := in.log.Debug(); ev != nil {
		ev.Str("error", clip(err.Error(), wire.MaxDescription)).Int("code", code).Str("subject", clip(subject, 256)).
			Msg("ingress: message rejected")
	}
	if ok, held := in.rejectLog.Allow(time.Now()); ok {
		in.log.Warn().Str("error", clip(err.Error(), wire.MaxDescription)).Int("code", code).
			Str("subject", clip(subject, 256)).Int64("more", held).
			Msg("ingress: message rejected")
	}
	return code
}

// clip bounds what a log line quotes of client input: errors quote header values, which can
// be as large as a payload, and a subject can be as long as the server's max control line.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// replyError publishes an error reply, if there is a reply subject and replies are on.
func (in *Ingress) replyError(reply string, code int, description string) {
	if reply == "" || in.cfg.NoReply {
		return
	}
	if len(description) > wire.MaxDescription {
		// A rune cut in two is written as U+FFFD by the JSON encoder.
		description = description[:wire.MaxDescription] + "..."
	}
	bufp := in.replyBufs.Get().(*[]byte)
	buf := wire.AppendErrorReply((*bufp)[:0], code, description)
	in.publishReply(reply, buf, &in.counters.errReplies)
	*bufp = buf[:0]
	in.replyBufs.Put(bufp)
}

// publishReply publishes data on reply and counts the outcome.
func (in *Ingress) publishReply(reply string, data []byte, sent *atomic.Int64) {
	if err := in.cfg.Conn.Publish(reply, data); err != nil {
		in.counters.replyFailures.Add(1)
		if ok, held := in.replyLog.Allow(time.Now()); ok {
			in.log.Warn().Err(err).Int64("more", held).Msg("ingress: a reply could not be published")
		}
		return
	}
	sent.Add(1)
}
