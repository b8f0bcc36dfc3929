package reader

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// Lookup returns the message with the offset message id msgID (RocketMQ's viewMessageById):
// ErrBadMsgID when msgID is not one, ErrNotFound when no record starts at its physical
// offset or the record there belongs to another id (another store host), ErrChecksum when the
// record fails its CRC check.
//
// It reads the CommitLog alone, which holds a record before it is acked: the id of an ack just
// received is always found, whatever dispatch has done (visible.go).
func (r *Reader) Lookup(msgID string) (Message, error) {
	host, phys, err := commitlog.ParseOffsetMsgID(msgID)
	if err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrBadMsgID, err)
	}
	release, err := r.use()
	if err != nil {
		return Message{}, err
	}
	defer release()
	cur := cursor{q: r.log.Queue()}
	defer cur.release()
	v, err := cur.view(phys)
	if err != nil || v.PhysicalOffset() != phys {
		return Message{}, fmt.Errorf("%w: %s (offset %d)", ErrNotFound, msgID, phys)
	}
	// The id must name this record: its host is the record's STOREHOST or this store's.
	var idBuf [msgIDRoom]byte
	own := v.AppendOffsetMsgID(idBuf[:0])
	if !strings.EqualFold(string(own), msgID) && (!r.host.IsValid() || r.host != host) {
		return Message{}, fmt.Errorf("%w: %s: the record at offset %d is %s", ErrNotFound, msgID, phys, own)
	}
	if err := r.checkCRC(v, phys, func() string { return "the message " + msgID }); err != nil {
		return Message{}, err
	}
	return decode(v, phys, r.host, &buffer{}, 0, true), nil
}

// MaxQueryMessages caps QueryRequest.Max; it is also how many index entries one round of a
// Query looks at (RocketMQ's maxMsgsNumBatch).
const MaxQueryMessages = 64

// queryRounds is how many times a Query asks the index (DefaultMessageStore.queryMessage).
const queryRounds = 3

// QueryRequest asks for the messages of a topic with a key.
type QueryRequest struct {
	Topic string
	// Key is matched against UNIQ_KEY and each token of KEYS, exactly.
	Key string
	// Begin and End bound the time of the index entries, in ms, both inclusive (End <= 0:
	// no bound). An entry's time is the store time truncated to whole seconds counted from its
	// index file's begin timestamp (the IndexFile keeps seconds), so it can be up to 999 ms
	// before the message's store time.
	Begin, End int64
	// Max bounds the number of messages (MaxQueryMessages when <= 0 or larger).
	Max int
	// NoAckWait answers from what is dispatched now, without waiting for dispatch to reach what
	// was acked (visible.go): for ingress's own lookups of message ids, which must not wait on
	// dispatch, and which the appender's dedupe window covers for records not dispatched yet.
	NoAckWait bool
}

// Query looks messages up by key in the IndexFile and returns them newest first (by
// CommitLog offset). The index compares hashes only, so every candidate record is read and
// kept only if its topic is req.Topic and its UNIQ_KEY or one of its KEYS tokens is req.Key.
//
// Rounds, after RocketMQ's queryMessage: a round asks the index for up to MaxQueryMessages
// candidates in [Begin, End]. When a round leaves fewer than Max matches although the index
// gave a full batch (more entries may lie further back: other keys with the same hash can
// fill a batch), the next round asks again with End lowered to the store time of the oldest
// candidate read, skipping the offsets already seen; at most three rounds. It stops early
// when the index gave less than a full batch (nothing more in range), when End would not go
// down, or when it falls below Begin. Records deleted by retention are skipped.
//
// A record's ConsumeQueue unit is written before its keys are indexed (dispatch builds them in
// that order, as RocketMQ does), so a message a Get returns may be missing from a Query for
// the moment of its dispatch; once Dispatched has passed the record, every read sees it.
//
// A Query first waits (bounded) until dispatch has reached what was acked when it arrived, so
// that it finds every message acked before it (visible.go), unless NoAckWait.
//
// ErrIndexDisabled when the store has no index; ErrInvalidRequest for an empty topic or key;
// ErrChecksum when a record with the key fails its CRC check.
func (r *Reader) Query(ctx context.Context, req QueryRequest) ([]Message, error) {
	if req.Topic == "" || req.Key == "" {
		return nil, fmt.Errorf("%w: query needs a topic and a key (topic %q, key %q)", ErrInvalidRequest, req.Topic, req.Key)
	}
	if !req.NoAckWait {
		r.catchUp(ctx, r.ackMark())
	}
	release, err := r.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if r.index == nil {
		return nil, ErrIndexDisabled
	}
	limit := req.Max
	if limit <= 0 || limit > MaxQueryMessages {
		limit = MaxQueryMessages
	}
	end := req.End
	if end <= 0 {
		end = math.MaxInt64
	}
	cur := cursor{q: r.log.Queue()}
	defer cur.release()
	var (
		out  []Message
		buf  buffer
		offs []int64
		seen = make(map[int64]struct{})
	)
	for range queryRounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := r.index.Query(offs, req.Topic, req.Key, MaxQueryMessages, req.Begin, end)
		if err != nil {
			return nil, fmt.Errorf("reader: query %s#%s: %w", req.Topic, req.Key, err)
		}
		offs = res.PhyOffsets
		oldest := int64(math.MaxInt64)
		for _, phys := range offs {
			if _, ok := seen[phys]; ok {
				continue
			}
			seen[phys] = struct{}{}
			v, ok, err := r.keyCandidate(&cur, phys, req.Topic, req.Key)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			oldest = min(oldest, v.StoreTimestamp())
			if hasKey(v, req.Topic, req.Key) {
				if err := r.checkKeyed(v, phys, req.Topic, req.Key); err != nil {
					return nil, err
				}
				out = append(out, decode(v, phys, r.host, &buf, 0, true))
			}
		}
		if len(out) >= limit || len(offs) < MaxQueryMessages || oldest >= end || oldest < req.Begin {
			break
		}
		end = oldest
	}
	slices.SortFunc(out, func(a, b Message) int { return cmp.Compare(b.PhysicalOffset, a.PhysicalOffset) })
	return out[:min(len(out), limit)], nil
}

// hasKey says the record belongs to topic and carries key as its UNIQ_KEY or in its KEYS.
func hasKey(v commitlog.View, topic, key string) bool {
	if string(v.Topic()) != topic {
		return false
	}
	if u, ok := v.UniqKey(); ok && string(u) == key {
		return true
	}
	it := v.Keys()
	for {
		k, ok := it.Next()
		if !ok {
			return false
		}
		if bytes.Equal(k, []byte(key)) {
			return true
		}
	}
}

// keyCandidate reads the record an index entry of topic#key names at phys: ok false for one
// retention removed or not yet written (skipped), an ErrCorrupt error for an entry that names
// no record. Query and SearchKey walk their candidates with it.
func (r *Reader) keyCandidate(cur *cursor, phys int64, topic, key string) (commitlog.View, bool, error) {
	v, err := cur.view(phys)
	if errors.Is(err, errGone) || errors.Is(err, errAhead) {
		return commitlog.View{}, false, nil
	}
	if err != nil || v.PhysicalOffset() != phys {
		return commitlog.View{}, false, fmt.Errorf("%w: index entry for %s#%s names offset %d, which holds no record: %v",
			ErrCorrupt, topic, key, phys, err)
	}
	return v, true, nil
}

// checkKeyed checks the CRC of a record found by its key, before it is served.
func (r *Reader) checkKeyed(v commitlog.View, phys int64, topic, key string) error {
	return r.checkCRC(v, phys, func() string { return fmt.Sprintf("a record of %s with the key %q", topic, key) })
}
