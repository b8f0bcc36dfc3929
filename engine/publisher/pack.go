package publisher

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// Packs (docs/BATCHED-ACKS.md, "Packs"): several messages of one subject go out as one NATS
// message, as a Kafka producer's record batch or a RocketMQ batch message does; internal/wire
// defines the framing (Rs-Pack and the entries of the body). The engine splits the pack back
// into messages, each with its own sequence, id, queue and ack.
// What this saves is NATS's cost per message (the publisher's, the server's and the engine's
// client's), most of what a small message costs on its way in. A pack holds one subject because
// NATS checks a publisher's permissions by subject: the engine stores each entry under the
// subject that NATS let through.
//
// Every subject has its own open pack (at most maxOpenPacks), and a message gets its sequence
// only when its pack is sent: the open packs are sent together, oldest first, each numbered on
// from the last, so that the stream still reaches the engine in sequence order (which is how it
// tells a lost message from a late one). Messages of one subject keep their publish order;
// across subjects, the sequences follow the packs. Packs are sent when one of them is full
// (MaxPack messages or MaxPackBytes), when the window is full, on Flush and Close, before any
// message sent alone (a resend, a message too big for a pack), and otherwise Linger after the
// first message of the oldest. A pack of one is sent as a plain batched message.

// maxOpenPacks bounds the subjects with an open pack; a message for one more sends them all.
const maxOpenPacks = 64

// Defaults of the pack options.
const (
	DefaultMaxPack      = 256
	DefaultMaxPackBytes = 64 << 10
	DefaultLinger       = 500 * time.Microsecond
)

// pack is the open pack of one subject: its messages, not numbered yet. Guarded by
// Publisher.mu.
type pack struct {
	subject string
	futs    []*Future
	bytes   int // of the body the entries will take
}

// queueLocked sends f, a new message: into its subject's open pack, or alone. p.mu must be held.
func (p *Publisher) queueLocked(f *Future, now instant) {
	if p.opts.MaxPack <= 1 {
		p.numberLocked(f)
		p.sendLocked(f, false, now)
		return
	}
	if len(p.open) > 0 && p.lingerDueLocked() <= now {
		// The linger is over: the packs go before this message, here rather than when
		// packLoop's timer fires, which on a busy machine is often a millisecond or more late.
		p.flushPacksLocked(now)
	}
	size := wire.PackEntryLen(f.header, f.data)
	pk := p.packs[f.subject]
	switch {
	case size > p.opts.MaxPackBytes:
		p.flushPacksLocked(now) // the order holds: what was published before goes first
		p.numberLocked(f)
		p.sendLocked(f, false, now)
		return
	case pk != nil && pk.bytes+size > p.opts.MaxPackBytes:
		p.flushPacksLocked(now)
		pk = nil
	case pk == nil && len(p.open) >= maxOpenPacks:
		p.flushPacksLocked(now)
	}
	if pk == nil {
		pk = p.newPackLocked(f.subject)
	}
	pk.futs = append(pk.futs, f)
	pk.bytes += size
	p.unsent++
	switch {
	case len(pk.futs) >= p.opts.MaxPack:
		p.flushPacksLocked(now)
	case len(p.open) == 1 && len(pk.futs) == 1:
		p.lingerFrom = now // the linger starts
		select {
		case p.packKick <- struct{}{}:
		default:
		}
	}
}

// numberLocked gives f the next sequence. p.mu must be held.
func (p *Publisher) numberLocked(f *Future) {
	f.seq = p.next
	p.next++
	p.ring[f.seq&p.mask] = f
}

// newPackLocked opens subject's pack, reusing a spare one.
func (p *Publisher) newPackLocked(subject string) *pack {
	var pk *pack
	if n := len(p.spare); n > 0 {
		pk, p.spare = p.spare[n-1], p.spare[:n-1]
	} else {
		pk = &pack{}
	}
	pk.subject = subject
	p.packs[subject] = pk
	p.open = append(p.open, pk)
	return pk
}

// takePacksLocked closes every open pack and returns them, oldest first; the caller hands them
// back with sparePacksLocked.
func (p *Publisher) takePacksLocked() []*pack {
	open := p.open
	p.open = p.spareOpen[:0]
	p.spareOpen = nil
	clear(p.packs)
	p.unsent = 0
	return open
}

func (p *Publisher) sparePacksLocked(open []*pack) {
	for _, pk := range open {
		clear(pk.futs)
		pk.futs, pk.bytes, pk.subject = pk.futs[:0], 0, ""
		p.spare = append(p.spare, pk)
	}
	clear(open)
	p.spareOpen = open[:0]
}

// flushPacksLocked numbers and sends the open packs, oldest first. p.mu must be held.
func (p *Publisher) flushPacksLocked(now instant) {
	if len(p.open) == 0 {
		return
	}
	open := p.takePacksLocked()
	for _, pk := range open {
		for _, f := range pk.futs {
			p.numberLocked(f)
		}
		p.sendPackLocked(pk, now)
	}
	p.sparePacksLocked(open)
}

// failUnsentLocked fails the messages of the open packs with err (they were never sent). p.mu
// must be held.
func (p *Publisher) failUnsentLocked(err error) {
	open := p.takePacksLocked()
	for _, pk := range open {
		for _, f := range pk.futs {
			p.failLocked(f, err)
		}
	}
	p.sparePacksLocked(open)
}

// sendPackLocked sends one pack, its messages numbered. p.mu must be held, and no pack may be
// open (a pack of one goes through sendLocked, which sends the open packs first).
func (p *Publisher) sendPackLocked(pk *pack, now instant) {
	if len(pk.futs) == 1 {
		p.sendLocked(pk.futs[0], false, now)
		return
	}
	body := p.packBody[:0]
	for _, f := range pk.futs {
		body = wire.AppendPackEntry(body, f.header, f.data)
	}
	p.packBody = body
	h := p.header
	clear(h)
	p.hdrBuf = wire.AppendSeqHeader(p.hdrBuf[:0], p.stream, pk.futs[0].seq, p.floor, false)
	p.seqValue[0] = string(p.hdrBuf)
	h[HeaderSeq] = p.seqValue[:]
	p.packCount[0] = strconv.Itoa(len(pk.futs))
	h[HeaderPack] = p.packCount[:]
	p.msg = nats.Msg{Subject: pk.subject, Reply: p.ackSubject, Header: h, Data: body}
	err := p.publish(&p.msg)
	for _, f := range pk.futs {
		f.sends++
		f.sentAt, f.retryAt = now, 0
		if err != nil {
			f.lastErr = err
		}
	}
	if err != nil {
		p.stats.SendErrors++
	}
	p.stats.Packs++
	p.stats.Packed += int64(len(pk.futs))
}

// lingerDueLocked is when the open packs are to go. p.mu must be held, and a pack open.
func (p *Publisher) lingerDueLocked() instant { return p.lingerFrom.after(p.opts.Linger) }

// packLoop sends the open packs Linger after the first message of the oldest, until Close,
// when no Publish came to send them: a Publish after the linger sends them itself (queueLocked).
func (p *Publisher) packLoop() {
	defer close(p.packDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-p.packKick:
		case <-p.stop:
			return
		}
		// Until the packs open now are sent: by a Publish, or here once their linger is over.
		for {
			p.mu.Lock()
			if len(p.open) == 0 {
				p.mu.Unlock()
				break
			}
			now := p.now()
			due := p.lingerDueLocked()
			if due <= now {
				p.flushPacksLocked(now)
				p.mu.Unlock()
				break
			}
			p.mu.Unlock()
			timer.Reset(time.Duration(due - now))
			select {
			case <-timer.C:
			case <-p.stop:
				return
			}
		}
	}
}
