package reader

import (
	"context"
	"fmt"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
)

// Key search without a cap (the console's): where Query stops at MaxQueryMessages, as RocketMQ
// does, SearchKey pages through every message of a key, a page at a time, each page resuming at
// the index entry after the last one it read (indexfile.WalkKey).

// Bounds of a key search page.
const (
	// MaxKeySearch caps KeySearchRequest.Max.
	MaxKeySearch = 1000
	// DefaultKeySearchSteps is how many index entries a page reads at most, matching or not: a
	// key whose chain other keys share (hash collisions, one slot) ends a page early, with a
	// cursor, instead of a request that runs as long as the chain.
	DefaultKeySearchSteps = 20_000
)

// KeySearchRequest asks for a page of the messages of a topic with a key.
type KeySearchRequest struct {
	Topic, Key string
	// UniqOnly matches the key against UNIQ_KEY only (a publisher's Nats-Msg-Id), not KEYS.
	UniqOnly bool
	// Begin and End bound the index entries' times (ms, inclusive; End <= 0: no bound), as in
	// QueryRequest.
	Begin, End int64
	// Subject keeps only messages whose NATS_SUBJECT matches it (a subject or a pattern).
	Subject string
	// Max bounds the messages of the page (at most MaxKeySearch; <= 0: 50). MaxSteps bounds the
	// index entries read (<= 0: DefaultKeySearchSteps).
	Max, MaxSteps int
	// After is where the page starts: the zero value at the newest entry, or a page's Next.
	After KeyCursor
}

// KeyCursor is where a key search stands: the index position to read next, and the CommitLog
// offset of the last message returned (a message indexed twice under the key, as UNIQ_KEY and in
// KEYS, has two consecutive entries: a page that ends between them must not give it again). The
// zero value starts a search (its Last, 0, means no message: nothing was returned yet).
type KeyCursor struct {
	indexfile.KeyCursor
	Last int64
}

// KeyPage is one page of a key search: messages newest first (by index entry).
type KeyPage struct {
	Messages []Message
	// Next continues the search; Done says there is nothing more in range.
	Next KeyCursor
	Done bool
}

// SearchKey returns a page of the messages of req.Topic whose UNIQ_KEY or a KEYS token is
// req.Key, in the index's order (newest first), checking each candidate's real key and topic
// (the index holds hashes). Records deleted by retention are skipped. ErrIndexDisabled when the
// store has no index; ErrInvalidRequest for an empty topic or key or a bad subject pattern.
func (r *Reader) SearchKey(ctx context.Context, req KeySearchRequest) (KeyPage, error) {
	if req.Topic == "" || req.Key == "" {
		return KeyPage{}, fmt.Errorf("%w: a key search needs a topic and a key (topic %q, key %q)", ErrInvalidRequest, req.Topic, req.Key)
	}
	if req.Subject != "" {
		if why := natssubject.Check(req.Subject, true); why != "" {
			return KeyPage{}, fmt.Errorf("%w: subject %q: %s", ErrInvalidRequest, req.Subject, why)
		}
	}
	limit := req.Max
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, MaxKeySearch)
	steps := req.MaxSteps
	if steps <= 0 {
		steps = DefaultKeySearchSteps
	}
	release, err := r.use()
	if err != nil {
		return KeyPage{}, err
	}
	defer release()
	if r.index == nil {
		return KeyPage{}, ErrIndexDisabled
	}
	cur := cursor{q: r.log.Queue()}
	defer cur.release()
	page := KeyPage{Next: req.After}
	if req.After.File == "" {
		page.Next.Last = -1 // the first page: nothing returned yet (offset 0 is a message's)
	}
	var (
		buf  buffer
		offs []int64
	)
	// Each walk asks for as many candidates as messages are still wanted, so that the page never
	// reads past its last message: the cursor after a walk is exact.
	for steps > 0 && len(page.Messages) < limit {
		if err := ctx.Err(); err != nil {
			return KeyPage{}, err
		}
		w := r.index.WalkKey(offs, req.Topic, req.Key, req.Begin, req.End, page.Next.KeyCursor, limit-len(page.Messages), steps)
		offs = w.PhyOffsets
		steps -= w.Steps
		for _, phys := range offs {
			if phys == page.Next.Last {
				continue
			}
			v, ok, err := r.keyCandidate(&cur, phys, req.Topic, req.Key)
			if err != nil {
				return KeyPage{}, err
			}
			if !ok {
				continue
			}
			if req.UniqOnly && !hasUniqKey(v, req.Topic, req.Key) || !req.UniqOnly && !hasKey(v, req.Topic, req.Key) {
				continue
			}
			if req.Subject != "" {
				s, ok := v.Properties().Get(natssubject.Property)
				if !ok || !natssubject.Match(req.Subject, s) {
					continue
				}
			}
			if err := r.checkKeyed(v, phys, req.Topic, req.Key); err != nil {
				return KeyPage{}, err
			}
			page.Messages = append(page.Messages, decode(v, phys, r.host, &buf, 0, true))
			page.Next.Last = phys
		}
		page.Next.KeyCursor = w.Next
		if w.Done {
			page.Done = true
			break
		}
		if w.Steps == 0 {
			break // cannot happen (a page that is not done has read an entry); never spin
		}
	}
	return page, nil
}

// hasUniqKey says the record belongs to topic and its UNIQ_KEY is key.
func hasUniqKey(v commitlog.View, topic, key string) bool {
	u, ok := v.UniqKey()
	return ok && string(v.Topic()) == topic && string(u) == key
}
