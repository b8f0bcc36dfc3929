package ingress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// recordSlack bounds how much longer a record is than its body, topic and properties: 91 fixed
// bytes (V1, IPv4 hosts) + 24 for two IPv6 hosts + 1 for a V2 topic length + 21 for the
// __CRC32# reservation and its separator.
const recordSlack = 91 + 24 + 1 + 21

// PropNatsSubject is the property that keeps a record's NATS subject.
const PropNatsSubject = natssubject.Property

// ReservedProperty reports whether a header called name is refused because the property of that
// name is set by the store (NATS_SUBJECT, and commitlog.ReservedProperty's) or reserved by
// RocketMQ (see the package doc).
func ReservedProperty(name string) bool {
	return name == PropNatsSubject || commitlog.ReservedProperty(name)
}

// hasValueSuffix reports whether name ends in '#' and at least one digit, the form this package
// gives a header's second and later values.
func hasValueSuffix(name string) bool {
	i := len(name)
	for i > 0 && '0' <= name[i-1] && name[i-1] <= '9' {
		i--
	}
	return i < len(name) && i > 0 && name[i-1] == '#'
}

// propBuilder turns a message's subject and headers into its properties string. Each worker owns
// one; its scratch buffers are reused from message to message, so building allocates nothing.
type propBuilder struct {
	keysHdr, tagsHdr string
	gen              *commitlog.UniqKeyGen // shared by every worker; safe for concurrent use
	// host is the store host's address, which the records carry: whether a UNIQ_KEY is indexed
	// is decided from it (commitlog.IsGeneratedUniqKey), as dispatch decides from the record.
	host  netip.Addr
	names []string
	buf   []byte
	// extra are properties appended after the message's own (a replicated record's
	// NATS_STREAM_SEQ), already encoded; the caller sets and clears them.
	extra []byte
	// uniq, when set, is the UNIQ_KEY of a message without a Nats-Msg-Id (the JetStream
	// bridge's stream and sequence) instead of a generated one, returned as its dedupe id; the
	// caller sets and clears it.
	uniq string
	// index is what dispatch needs of the last record built (recordindex.go); set only when
	// the build succeeds.
	index stages.RecordIndex
	// seqAt is where the sequence's digits start in the last properties built, when their
	// UNIQ_KEY is "<stream>:<seq>", and -1 otherwise (packtemplate.go); set with index.
	seqAt int
	// genAt is where the generated UNIQ_KEY starts in the last properties built, when it was
	// generated, and -1 otherwise (plaintemplate.go); set with index.
	genAt int
	// bornAt is when the worker took the batch being built: the time generated keys carry.
	bornAt time.Time
}

// build returns the properties of m (valid until the next build) and its dedupe id (the
// Nats-Msg-Id, "" when the UNIQ_KEY was generated). The error wraps ErrInvalidHeader or
// route.ErrInvalidSubject and says what to change.
func (b *propBuilder) build(m *nats.Msg, rt *route.Route) (props []byte, msgID string, err error) {
	return b.buildWith(m, rt, nil)
}

// buildWith is build for a message of a batched-ack stream when seq is not nil: its Rs-Seq header
// is not stored, and without a Nats-Msg-Id its UNIQ_KEY is "<stream>:<seq>" (wire.DerivedMsgID), for
// which it returns msgID "".
func (b *propBuilder) buildWith(m *nats.Msg, rt *route.Route, seq *wire.SeqHeader) (props []byte, msgID string, err error) {
	h := m.Header
	subject := m.Subject
	if rt.Stored != "" {
		subject = rt.Stored
	}
	buf := commitlog.AppendProperty(b.buf[:0], PropNatsSubject, subject)
	uniqAt := len(buf) + len(commitlog.PropUniqKey) + 1 // where the UNIQ_KEY's value starts
	seqAt, genAt := -1, -1

	if ids := h[nats.MsgIdHdr]; len(ids) > 0 {
		if len(ids) > 1 {
			return nil, "", fmt.Errorf("%w: %s has %d values; a message has one id", ErrInvalidHeader,
				nats.MsgIdHdr, len(ids))
		}
		if err := commitlog.CheckProperty(commitlog.PropUniqKey, ids[0]); err != nil {
			return nil, "", fmt.Errorf("%w: %s: %w", ErrInvalidHeader, nats.MsgIdHdr, err)
		}
		msgID = ids[0]
		buf = commitlog.AppendProperty(buf, commitlog.PropUniqKey, msgID)
	} else if seq != nil {
		// "<stream>:<seq>", written in place; msgID stays "": the caller makes the string only
		// when it needs it (worker_batched.go).
		buf = append(buf, commitlog.PropUniqKey...)
		buf = append(buf, commitlog.NameValueSeparator)
		seqAt = len(buf) + len(seq.Stream) + 1
		buf = wire.AppendDerivedMsgID(buf, seq.Stream, seq.Seq)
		buf = append(buf, commitlog.PropertySeparator)
	} else if b.uniq != "" {
		msgID = b.uniq
		buf = commitlog.AppendProperty(buf, commitlog.PropUniqKey, msgID)
	} else {
		buf = append(buf, commitlog.PropUniqKey...)
		buf = append(buf, commitlog.NameValueSeparator)
		genAt = len(buf)
		if b.bornAt.IsZero() {
			buf = b.gen.Append(buf) // built outside a batch
		} else {
			buf = b.gen.AppendAt(buf, b.bornAt)
		}
		buf = append(buf, commitlog.PropertySeparator)
	}

	uniq := buf[uniqAt : len(buf)-1]
	keys := h[b.keysHdr]
	if len(keys) > 0 {
		buf = append(buf, commitlog.PropKeys...)
		buf = append(buf, commitlog.NameValueSeparator)
		for i, k := range keys {
			// Each value non-empty and clean makes the joined value clean too.
			if err := commitlog.CheckProperty(commitlog.PropKeys, k); err != nil {
				return nil, "", fmt.Errorf("%w: %s: %w", ErrInvalidHeader, b.keysHdr, err)
			}
			if i > 0 {
				buf = append(buf, commitlog.KeySeparator)
			}
			buf = append(buf, k...)
		}
		buf = append(buf, commitlog.PropertySeparator)
	}

	tagsValue := rt.Tags
	tagsHdr := b.tagsHdr
	if rt.SubjectTags {
		tagsHdr = "" // TAGS is the subject; the header is an ordinary one
	}
	if tags := h[tagsHdr]; len(tags) > 0 {
		if len(tags) > 1 {
			return nil, "", fmt.Errorf("%w: %s has %d values; TAGS holds one", ErrInvalidHeader,
				b.tagsHdr, len(tags))
		}
		if err := commitlog.CheckProperty(commitlog.PropTags, tags[0]); err != nil {
			return nil, "", fmt.Errorf("%w: %s: %w", ErrInvalidHeader, b.tagsHdr, err)
		}
		buf = commitlog.AppendProperty(buf, commitlog.PropTags, tags[0])
		tagsValue = tags[0]
	} else if rt.Tags != "" {
		buf = commitlog.AppendProperty(buf, commitlog.PropTags, rt.Tags)
	}

	names := b.names[:0]
	for name := range h {
		if name != nats.MsgIdHdr && name != b.keysHdr && name != tagsHdr && (seq == nil || name != wire.HeaderSeq) {
			names = append(names, name)
		}
	}
	slices.Sort(names) // the stored bytes must not depend on map order
	defer func() {
		clear(names) // do not keep the last message's headers alive
		b.names = names[:0]
	}()
	for _, name := range names {
		if ReservedProperty(name) {
			return nil, "", fmt.Errorf("%w: header %q has the name of a property the store sets or "+
				"RocketMQ reserves; rename the header", ErrInvalidHeader, name)
		}
		if hasValueSuffix(name) {
			return nil, "", fmt.Errorf("%w: header %q ends in '#' and digits, the form that stores a "+
				"header's further values (name#2, name#3...); rename the header", ErrInvalidHeader, name)
		}
		for i, v := range h[name] {
			if err := commitlog.CheckProperty(name, v); err != nil {
				return nil, "", fmt.Errorf("%w: header %q: %w", ErrInvalidHeader, name, err)
			}
			buf = append(buf, name...)
			if i > 0 {
				buf = append(buf, '#')
				buf = strconv.AppendInt(buf, int64(i+1), 10)
			}
			buf = append(buf, commitlog.NameValueSeparator)
			buf = append(buf, v...)
			buf = append(buf, commitlog.PropertySeparator)
		}
	}
	buf = append(buf, b.extra...)
	b.buf = buf
	b.index = recordIndex(rt, uniq, b.host, keys, tagsValue)
	b.seqAt, b.genAt = seqAt, genAt
	return buf, msgID, nil
}

// encodeSeq is encode for a message of a batched-ack stream when seq is not nil.
func (w *worker) encodeSeq(j *job, born int64, seq *wire.SeqHeader) (stages.Record, error) {
	var r stages.Record
	err := w.encodeInto(&r, j, born, seq)
	return r, err
}

// encodeInto is encodeSeq building the record in r, a zeroed slot (see batched); on error r is
// left as it may be.
func (w *worker) encodeInto(r *stages.Record, j *job, born int64, seq *wire.SeqHeader) error {
	rt := j.route
	if rt.Err != nil {
		return rt.Err
	}
	tmpl := templated(j, seq)
	if tmpl && w.tmpl.holds(j.pack, rt, born) {
		return w.fromTemplate(r, j, seq)
	}
	if undecodedHeaders(j.msg) {
		return errUndecodedHeaders
	}
	plain := plainTemplated(j, seq)
	if plain {
		if t := w.plain.of(rt); t != nil {
			return w.fromPlainTemplate(t, r, j, born)
		}
	}
	props, msgID, err := w.props.buildWith(j.msg, rt, seq)
	if err != nil {
		return err
	}
	cfg := &w.in.cfg
	// The worker's own Message, filled in place: a new one per message was a tenth of the
	// encoding's time (a large struct to zero and copy). Only these fields are ever set; the
	// others stay zero, as a record from NATS has them.
	m := &w.msg
	m.Topic, m.QueueID, m.BornTimestamp = rt.Topic, j.queue, born
	m.BornHost, m.StoreHost = cfg.BornHost, cfg.StoreHost
	m.Body, m.Properties = j.msg.Data, props
	free := w.arenaTail(len(m.Body) + len(m.Topic) + len(props) + recordSlack)
	// Encoding into the free tail of the arena writes in place; a record too big for an arena
	// gets a buffer of its own from AppendRecord, after its checks, so a rejected oversized
	// body costs no allocation.
	rec, err := commitlog.AppendRecord(free, m, *cfg.Encode)
	m.Body, m.Properties = nil, nil // keep no message alive
	if err != nil {
		return err
	}
	w.keep(free, rec)
	switch {
	case tmpl:
		w.tmpl.reset(j, born, seq, rec, props, &w.props, *cfg.Encode)
	case plain:
		w.plain.reset(j, born, rec, props, &w.props, *cfg.Encode)
	}
	r.Bytes = rec[:len(rec):len(rec)] // capped: an append must never run into the next record
	r.Topic, r.QueueID, r.PropCRC = rt.Topic, j.queue, cfg.Encode.PropCRC
	r.MsgID, r.Reply, r.Index = msgID, j.msg.Reply, w.props.index
	return nil
}

// arenaTail is the free tail of the worker's arena, with room for need bytes (a new arena when
// the current one has less), or nil when need is more than an arena holds.
func (w *worker) arenaTail(need int) []byte {
	if need > stages.ArenaSize {
		return nil
	}
	if w.arena == nil || cap(w.arena.Buf)-len(w.arena.Buf) < need {
		if w.arena != nil {
			w.arena.Release()
		}
		w.arena = stages.NewArena()
	}
	return w.arena.Buf[len(w.arena.Buf):]
}

// keep accounts for rec, encoded into free (from arenaTail): it takes its bytes from the arena,
// and the batch being built holds the arena. A record encoded elsewhere (free nil) owns its
// buffer.
func (w *worker) keep(free, rec []byte) {
	if free == nil {
		return
	}
	w.arena.Buf = w.arena.Buf[:len(w.arena.Buf)+len(rec)]
	if n := len(w.held); n == 0 || w.held[n-1] != w.arena {
		w.arena.Hold()
		w.held = append(w.held, w.arena)
	}
}

// errUndecodedHeaders: see undecodedHeaders.
var errUndecodedHeaders = fmt.Errorf("%w: the message's header block is malformed and could not be "+
	"decoded (a header line without ':', or no blank line at its end); nothing of it could be "+
	"stored, so the message is refused rather than stored without its headers", ErrInvalidHeader)

// undecodedHeaders reports whether m came with a header block nats.go could not decode: it then
// delivers the message with no Header at all (and reports ErrBadHeaderMsg to the connection's
// error handler), which would store the message silently stripped of its headers. A received
// message's Size counts the header block on the wire, so the block's presence shows as bytes
// that neither the subject, the reply subject nor the body account for. (A message made in this
// process has no such bytes.)
func undecodedHeaders(m *nats.Msg) bool {
	return m.Header == nil && m.Size() > len(m.Subject)+len(m.Reply)+len(m.Data)
}
