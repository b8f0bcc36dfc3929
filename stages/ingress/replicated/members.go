package replicated

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages/ingress/route"
)

// The live set of replicated mode (assign.go). Every engine that shares a consumer publishes
// a heartbeat on that consumer's members subject, plain core NATS, every Heartbeat, and listens
// to the others'. An engine not heard for memberTimeouts heartbeats is gone; one that says it is
// leaving is gone at once. A new assignment is applied only once the set has stayed the same for
// settleBeats heartbeats, so an engine that starts a moment after the others, or a heartbeat
// that arrives late, moves nothing twice: the pins follow the set after it settles, not each
// change of it.

// MembersSubjectPrefix is where the heartbeats go: <prefix>.<stream prefix>.<consumer>. A
// $-subject: never stored, and out of the publishers' mappings.
const MembersSubjectPrefix = "$RS.REPL"

// DefaultReplicatedHeartbeat is how often an engine says it is alive (Config.Heartbeat).
const DefaultReplicatedHeartbeat = time.Second

const (
	// memberTimeouts: heartbeats missed before an engine counts as gone.
	memberTimeouts = 5
	// settleBeats: heartbeats the live set must stay the same before it is acted on.
	settleBeats = 2
	// maxMemberName bounds a member's name and nonce in a heartbeat.
	maxMemberName = 256
)

// decodeBeat decodes and checks a heartbeat.
func decodeBeat(data []byte) (replMember, error) {
	var m replMember
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return replMember{}, fmt.Errorf("replicated heartbeat: %w", err)
	}
	if dec.More() {
		return replMember{}, errors.New("replicated heartbeat: data after the object")
	}
	for _, f := range []struct{ what, v string }{{"name", m.Name}, {"nonce", m.Nonce}} {
		if f.v == "" || len(f.v) > maxMemberName || !utf8.ValidString(f.v) || strings.ContainsRune(f.v, '/') {
			return replMember{}, fmt.Errorf("replicated heartbeat: %s %.40q: want 1 to %d bytes of UTF-8 without '/'", f.what, f.v, maxMemberName)
		}
	}
	if len(m.Parts) > route.MaxPartitions {
		return replMember{}, fmt.Errorf("replicated heartbeat: %d partitions, more than %d", len(m.Parts), route.MaxPartitions)
	}
	for i, p := range m.Parts {
		if p < 0 || p >= route.MaxPartitions || i > 0 && p <= m.Parts[i-1] {
			return replMember{}, fmt.Errorf("replicated heartbeat: partitions not ascending within 0..%d at %d", route.MaxPartitions-1, i)
		}
	}
	return m, nil
}

// replMembers is the live set as this engine hears it.
type replMembers struct {
	self    replMember
	subject string
	beat    time.Duration

	mu   sync.Mutex
	seen map[string]seenMember // guarded by mu: by key, the others
	// changed is signalled when a member joins or leaves (capacity 1).
	changed chan struct{}
}

type seenMember struct {
	m  replMember
	at time.Time
}

func newReplMembers(self replMember, subject string, beat time.Duration) *replMembers {
	return &replMembers{self: self, subject: subject, beat: beat, seen: map[string]seenMember{},
		changed: make(chan struct{}, 1)}
}

// onBeat records a heartbeat (a subscription callback). The engine's own never comes back
// (its connection has no echo); a copy of them would be ignored anyway.
func (ms *replMembers) onBeat(m replMember, now time.Time) {
	if m.key() == ms.self.key() {
		return
	}
	ms.mu.Lock()
	_, known := ms.seen[m.key()]
	if m.Leaving {
		delete(ms.seen, m.key())
	} else {
		ms.seen[m.key()] = seenMember{m: m, at: now}
	}
	ms.mu.Unlock()
	if joined, left := !known && !m.Leaving, known && m.Leaving; joined || left {
		select {
		case ms.changed <- struct{}{}:
		default:
		}
	}
}

// live drops the members not heard for too long and returns the rest and this engine, by key.
func (ms *replMembers) live(now time.Time) []replMember {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := []replMember{ms.self}
	for k, s := range ms.seen {
		if now.Sub(s.at) > memberTimeouts*ms.beat {
			delete(ms.seen, k)
			continue
		}
		out = append(out, s.m)
	}
	slices.SortFunc(out, func(a, b replMember) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// viewOf is a live set's identity: its members and what they own.
func viewOf(live []replMember) string {
	var b strings.Builder
	for _, m := range live {
		b.WriteString(m.key())
		for _, p := range m.Parts {
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(p))
		}
		b.WriteByte(';')
	}
	return b.String()
}

// publish sends this engine's heartbeat (leaving: its last).
func (ms *replMembers) publish(nc *nats.Conn, leaving bool) error {
	m := ms.self
	m.Leaving = leaving
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return nc.Publish(ms.subject, data)
}

// balance keeps the live set and applies its assignment to the partitions until ctx ends (the
// last heartbeat, leaving, is Stop's).
func (r *Source) balance(ctx context.Context) {
	ms, nc := r.members, r.conn
	sub, err := nc.Subscribe(ms.subject, func(msg *nats.Msg) {
		m, err := decodeBeat(msg.Data)
		if err != nil {
			if ok, held := r.beatLog.Allow(time.Now()); ok {
				r.log.Warn().Err(err).Str("subject", msg.Subject).Int64("more", held).
					Msg("ingress: replicated: a heartbeat that is not one; ignored (logged at most every 10s)")
			}
			return
		}
		ms.onBeat(m, time.Now())
	})
	if err != nil {
		// Only a closed connection refuses a subscription: nothing is taken then anyway.
		r.log.Error().Err(err).Msg("ingress: replicated: cannot hear the other engines; taking every partition")
		r.apply([]replMember{ms.self})
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	tick := time.NewTicker(ms.beat)
	defer tick.Stop()
	st := settler{settle: settleBeats * ms.beat, since: time.Now()}
	for {
		if err := ms.publish(nc, false); err != nil {
			r.log.Debug().Err(err).Msg("ingress: replicated heartbeat")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-ms.changed:
		}
		now := time.Now()
		live := ms.live(now)
		if st.observe(viewOf(live), now) {
			r.apply(live)
		}
	}
}

// settler decides when a live set is acted on: once it has stayed the same for settle, and
// only if it differs from the one acted on last. A set that changes back and forth faster than
// that is never acted on until it holds still.
type settler struct {
	settle        time.Duration
	view, applied string
	since         time.Time // when view was first seen
}

// observe notes the live set seen at now and reports whether to act on it now.
func (s *settler) observe(view string, now time.Time) bool {
	if view != s.view {
		s.view, s.since = view, now
	}
	if s.view == s.applied || now.Sub(s.since) < s.settle {
		return false
	}
	s.applied = s.view
	return true
}

// apply gives each partition to its engine of the assignment of live.
func (r *Source) apply(live []replMember) {
	var all []int
	names := make([]string, 0, len(live))
	for _, m := range live {
		all = append(all, m.Parts...)
		names = append(names, m.Name)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	assign := assignPartitions(all, live)
	self := r.members.self.key()
	var mine []int
	for p, rp := range r.parts {
		rp.setAssigned(assign[p] == self)
		if assign[p] == self {
			mine = append(mine, p)
		}
	}
	slices.Sort(mine)
	r.log.Info().Strs("engines", names).Int("taken_here", len(mine)).Ints("partitions", mine).
		Msg("ingress: replicated: partitions spread over the live engines")
	r.stateMu.Lock()
	r.live = names
	r.stateMu.Unlock()
	r.settledOnce.Do(func() { close(r.settled); r.startStep() })
}
