package api

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// HeaderReadWaitSkipped on a batched read's reply: it asked to wait, but every long-poll slot was
// taken, so it was answered at once; the member pauses before it asks again.
const HeaderReadWaitSkipped = "Rs-Read-Wait-Skipped"

// skippedPause is how long a member's reader pauses after an empty reply whose long poll was
// skipped, and after an engine did not answer.
const skippedPause = 100 * time.Millisecond

// loop is the member's control: pushed assignments, heartbeats, auto-commits, releases and
// joining again. Reads run on a goroutine per session (read).
func (m *Member) loop() {
	hb := time.NewTimer(m.heartbeatEvery())
	defer hb.Stop()
	var commits <-chan time.Time
	if !m.cfg.ManualCommit {
		t := time.NewTicker(m.cfg.AutoCommitInterval)
		defer t.Stop()
		commits = t.C
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case msg := <-m.events:
			var a Assignment
			if json.Unmarshal(msg.Data, &a) == nil && a.Engine != "" {
				m.apply(a)
			}
		case <-hb.C:
			m.heartbeats()
			hb.Reset(m.heartbeatEvery())
		case <-commits:
			_ = m.commitHandled(m.ctx) // failures: the next tick commits again, or the queue was dropped
		case <-m.control:
		}
		m.mu.Lock()
		beat := m.beatNow
		m.beatNow = false
		m.mu.Unlock()
		if beat {
			m.heartbeats() // a read was fenced: the assignment says why
		}
		m.releases()
		m.mu.Lock()
		rejoin := m.rejoin
		m.mu.Unlock()
		if rejoin && m.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(m.ctx, m.c.timeout)
			if err := m.discover(ctx); err == nil {
				m.mu.Lock()
				m.rejoin = false
				m.mu.Unlock()
			}
			cancel()
		}
	}
}

// heartbeatEvery is the shortest heartbeat interval the engines asked for.
func (m *Member) heartbeatEvery() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	every := time.Second
	for _, s := range m.sessions {
		if s.heartbeat > 0 && s.heartbeat < every {
			every = s.heartbeat
		}
	}
	return every
}

// heartbeats heartbeats every session at once and takes the assignments they return. An
// engine that does not know the member any more (404) is joined again; one that does not answer
// is given up, its queues dropped, and the member looks for the engines again: at once on no
// responders, and once it has not answered for a whole session timeout otherwise (the session
// is gone there by then). An engine that restarted may never answer: the subjects of its old id
// are nobody's, and another engine's ingress subscription (on ">") takes them without a reply.
func (m *Member) heartbeats() {
	m.mu.Lock()
	sessions := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		sessions = append(sessions, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { m.heartbeat(s) })
	}
	wg.Wait()
}

func (m *Member) heartbeat(s *session) {
	m.mu.Lock()
	within := min(m.c.timeout, s.timeout)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(m.ctx, within)
	defer cancel()
	var a Assignment
	err := m.c.requestTo(ctx, s.api+"."+EndpointGroupHeartbeat, 0,
		MemberRequest{Group: m.cfg.Group, Topic: m.cfg.Topic, MemberID: m.id}, &a)
	switch {
	case err == nil:
		m.apply(a)
	case CodeOf(err) == CodeNotFound:
		m.rejoinSession(s)
	case errors.Is(err, nats.ErrNoResponders):
		m.forget(s)
	case m.ctx.Err() == nil:
		m.mu.Lock()
		silent := time.Since(s.heard) >= s.timeout
		m.mu.Unlock()
		if silent {
			m.forget(s)
		}
	}
}

// rejoinSession joins again on an engine that forgot the member (its session ran out there, or
// the engine restarted): its queues are dropped without a commit (they are someone else's, or
// will be assigned again from the group's commits).
func (m *Member) rejoinSession(s *session) {
	m.mu.Lock()
	for id, q := range m.queues {
		if q.s == s {
			m.dropLocked(id)
		}
	}
	m.mu.Unlock()
	var a Assignment
	err := m.c.requestTo(m.ctx, s.api+"."+EndpointGroupJoin, 0, JoinRequest{Group: m.cfg.Group, Topic: m.cfg.Topic,
		Subject: m.cfg.Subject, MemberID: m.id, ClientID: m.cfg.ClientID, Notify: m.notify.Subject, Start: m.cfg.Start}, &a)
	if err != nil {
		m.forget(s)
		return
	}
	m.mu.Lock()
	s.generation = 0 // a new session: its generations start again
	m.mu.Unlock()
	m.apply(a)
}

// forget gives up a session whose engine does not answer: its queues are dropped, and the member
// looks for the engines again (an engine that restarted has a new id).
func (m *Member) forget(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, q := range m.queues {
		if q.s == s {
			m.dropLocked(id)
		}
	}
	s.gone = true
	m.kickLocked(s)
	delete(m.sessions, s.engine)
	m.rejoin = true
	if m.cfg.OnAssign != nil {
		m.cfg.OnAssign(m.heldLocked())
	}
}

// releases releases the queues asked back whose messages handed out are all handled, at the
// offset after the last one.
func (m *Member) releases() {
	m.mu.Lock()
	todo := map[*session][]QueueOffset{}
	for _, q := range m.queues {
		if q.revoking && m.inFlight != q {
			todo[q.s] = append(todo[q.s], QueueOffset{QueueID: q.id, Epoch: q.epoch, Offset: m.positionLocked(q)})
		}
	}
	m.mu.Unlock()
	for s, queues := range todo {
		var a Assignment
		err := m.c.requestTo(m.ctx, s.api+"."+EndpointGroupRelease, 0, ReleaseRequest{Group: m.cfg.Group, Topic: m.cfg.Topic,
			MemberID: m.id, Queues: queues}, &a)
		switch {
		case err == nil:
			m.apply(a) // the queues released are no longer listed: dropped
		case CodeOf(err) == CodeNotFound:
			m.rejoinSession(s)
		case CodeOf(err) == CodeConflict:
			m.mu.Lock()
			for _, q := range queues {
				m.dropLocked(q.QueueID) // taken from the member already
			}
			m.mu.Unlock()
		}
	}
}

// read is a session's reader: one batched read of every queue it holds at a time, long-polling
// at the end of them, while the member's buffer has room.
func (m *Member) read(s *session) {
	skipped := 0 // reads in a row that found nothing and whose long poll was skipped
	for {
		m.mu.Lock()
		if m.closed || s.gone {
			m.mu.Unlock()
			return
		}
		room := m.cfg.Buffer - m.bufferedLocked()
		req := ReadRequest{Topic: m.cfg.Topic, Group: m.cfg.Group, MemberID: m.id, Max: min(m.cfg.MaxBatch, max(room, 0)),
			MaxBytes: m.cfg.MaxBytes, WaitMs: m.cfg.Wait.Milliseconds()}
		if room > 0 {
			for _, q := range m.queues {
				if q.s == s && !q.revoking && !q.fenced {
					req.Queues = append(req.Queues, ReadQueue{QueueID: q.id, Offset: q.next, Epoch: q.epoch})
				}
			}
		}
		if len(req.Queues) == 0 {
			m.mu.Unlock()
			select {
			case <-s.kick:
			case <-m.ctx.Done():
				return
			}
			continue
		}
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Wait+m.c.timeout)
		s.cancelRead = cancel
		m.mu.Unlock()
		data, _ := json.Marshal(req)
		msg, err := m.c.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: s.api + "." + EndpointRead, Data: data})
		cancel()
		m.mu.Lock()
		s.cancelRead = nil
		m.mu.Unlock()
		var sections []ReadSection
		if err == nil {
			sections, err = ParseReadReply(msg)
		}
		switch {
		case m.ctx.Err() != nil:
			return
		case errors.Is(err, context.Canceled):
			continue // its queues changed: ask again at once
		case errors.Is(err, nats.ErrNoResponders):
			m.forget(s)
			return
		case CodeOf(err) == CodeNotFound:
			m.mu.Lock()
			m.rejoin = true
			m.mu.Unlock()
			m.signal(m.control)
			m.pause(s)
			continue
		case CodeOf(err) == CodeInternal:
			// A damaged store (a record that fails its CRC check) or a bug: asking again gets
			// the same answer, so Next says it rather than the member waiting in silence.
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			m.signal(m.ready)
			return // Next returns err from now on: nothing this session reads would be handed out
		case err != nil:
			m.pause(s) // a timeout, or the engine stopping: try again
			continue
		}
		m.mu.Lock()
		s.heard = time.Now()
		m.mu.Unlock()
		if n := m.take(s, req, sections); n == 0 && msg.Header.Get(HeaderReadWaitSkipped) != "" {
			// No long-poll slot and nothing to read: pause, twice as long each time in a row,
			// up to the wait a long poll would have had.
			m.pauseFor(s, min(skippedPause<<min(skipped, 6), max(m.cfg.Wait, skippedPause)))
			skipped++
		} else {
			skipped = 0
		}
	}
}

// pause waits a little before a session's next read, or less if its queues change.
func (m *Member) pause(s *session) { m.pauseFor(s, skippedPause) }

func (m *Member) pauseFor(s *session, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.kick:
	case <-m.ctx.Done():
	}
}

// take puts the messages of a read's reply in the buffer: only for queues still held as the
// read named them, at the offset it read from; it returns how many.
func (m *Member) take(s *session, req ReadRequest, sections []ReadSection) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.head > 0 { // what is left to the front, so that appending reuses the array
		n := copy(m.buf, m.buf[m.head:])
		clear(m.buf[n:])
		m.buf, m.head = m.buf[:n], 0
	}
	taken := 0
	for i, sec := range sections {
		if i >= len(req.Queues) || req.Queues[i].QueueID != sec.QueueID {
			break // not the reply to this request
		}
		rq := req.Queues[i]
		q := m.queues[sec.QueueID]
		if q == nil || q.s != s || q.epoch != rq.Epoch || q.revoking || q.fenced || q.next != rq.Offset {
			continue // changed while the read was under way
		}
		switch sec.Status {
		case ReadFenced:
			// Asked back (the push saying so may still be on its way), or taken: stop
			// reading and handing it out, and heartbeat now. Dropped, a queue asked back
			// would never be released, and its group would wait for the rebalance timeout.
			m.discardLocked(q)
			q.fenced = true
			m.beatNow = true
			m.signal(m.control)
			continue
		case ReadTooLarge:
			m.err = &Error{Code: CodeInternal, Description: "a message of queue " + itoa(q.id) +
				" is larger than a reply can carry (raise the NATS server's max_payload)"}
			m.signal(m.ready)
			continue
		}
		for rec, err := range sec.Records() {
			if err != nil {
				m.err = err
				break
			}
			m.buf = append(m.buf, delivery{rec: rec, q: q, off: rec.QueueOffset()})
			q.buffered++
			taken++
		}
		q.next = max(q.next, sec.NextOffset)
		if sec.Status == ReadOffsetTooSmall || sec.Status == ReadOffsetOverflowBadly {
			q.next = sec.NextOffset // retention removed it, or a reset moved it: go on from there
		}
		q.atEnd = q.next >= sec.MaxOffset // read to its end, as of this read (no need for an empty one)
	}
	m.counted()
	if taken > 0 || m.err != nil {
		m.signal(m.ready)
	}
	return taken
}

func itoa(n int32) string {
	b, _ := json.Marshal(n)
	return string(b)
}
