package readapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/reader"
)

// The pull endpoint (see the engine/api package doc, "Pull"): a get whose messages go out one
// NATS message each to the request's reply subject, body as stored, headers rebuilt as a
// replay's and the position in the message's reply subject (api.PulledPrefix), followed by an
// end message (headers only) with the status and the next offset. All of them are published on
// the engine's connection, so they reach the subscriber in that order.
//
// Scheduling is the get's: a pull that asks to wait runs on a long-poll goroutine (the same
// MaxLongPolls slots as gets), or, when every slot is taken, inline without waiting
// (Rs-Pull-Wait-Skipped); any other pull runs inline on the endpoint's goroutine. Bounds: Max
// and MaxBytes; a message whose body and headers exceed the max payload goes without its body
// (Rs-Partial).
//
// Hot path. A pull reads with Engine.Get without property maps and publishes every message
// from one nats.Msg and one nats.Header it reuses: the map is cleared for each message, the
// values' slices are carved from one array, names and values are views of the record's copy,
// and the reply subject is formatted into a scratch buffer. This is safe because nats.go's
// PublishMsg encodes the headers and copies the subject, reply and body into its write buffer
// before it returns; nothing keeps the map or its strings after that. A message then costs
// nats.go's header encoding, when it has headers, and no allocation of ours.

// pullHeader builds the headers of pulled messages in one reused map (see above), keeping the
// size of their encoding.
type pullHeader struct {
	h          nats.Header
	vals       []string // the backing of the current message's values: h's slices are views of it
	keys, tags string   // the headers KEYS and TAGS go back to
	num        []byte   // the current message's reply subject, then the digits of Rs-Partial
	size       int      // the encoded size of h, as nats.go counts it at most
	reply      string   // the current message's reply subject, a view of num
}

// hdrOverhead is what nats.go's header encoding adds to the lines: "NATS/1.0\r\n" and "\r\n".
const hdrOverhead = len("NATS/1.0\r\n") + len("\r\n")

func newPullHeader(keys, tags string) *pullHeader {
	return &pullHeader{h: nats.Header{}, vals: make([]string, 0, 32), keys: keys, tags: tags, num: make([]byte, 0, 256)}
}

// reset empties the headers for the next message (clearing a small map is cheaper than ranging
// over it).
func (p *pullHeader) reset() {
	clear(p.h)
	p.vals = p.vals[:0]
	p.num = p.num[:0]
	p.size = hdrOverhead
}

// one returns a one-value slice of p.vals holding v (its capacity ends with it, so an append to
// it copies instead of overwriting the next value). When p.vals is full a new array replaces
// it: the slices already handed out keep the old one.
func (p *pullHeader) one(v string) []string {
	if len(p.vals) == cap(p.vals) {
		p.vals = make([]string, 0, 2*cap(p.vals))
	}
	p.vals = append(p.vals, v)
	n := len(p.vals)
	return p.vals[n-1 : n : n]
}

// Add appends a value to a header (a line "name: value\r\n").
func (p *pullHeader) Add(name, value string) {
	if old := p.h[name]; len(old) > 0 {
		p.h[name] = append(old, value) // a header's second value: rare, allocates
	} else {
		p.h[name] = p.one(value)
	}
	p.size += len(name) + len(value) + 4
}

// Set makes value the header's only value.
func (p *pullHeader) Set(name, value string) {
	for _, v := range p.h[name] {
		p.size -= len(name) + len(v) + 4
	}
	p.h[name] = p.one(value)
	p.size += len(name) + len(value) + 4
}

// setInt sets a header to n's digits, formatted into p.num (should that reallocate p.num, the
// views already taken keep the old array).
func (p *pullHeader) setInt(name string, n int64) {
	start := len(p.num)
	p.num = strconv.AppendInt(p.num, n, 10)
	p.Set(name, bytesString(p.num[start:]))
}

// bytesString views b as a string. Only for bytes nothing writes while the string is in use:
// a record's copy (never written again) or p.num until the message is published.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// build fills the headers of m, the original ones from its properties as a replay rebuilds
// them (replay.RebuildHeaders, viewing the record's copy in place), and its reply subject.
func (p *pullHeader) build(m *reader.Message) {
	p.reset()
	replay.RebuildHeaders(p, m, p.keys, p.tags, bytesString)
	b := append(p.num[:0], api.PulledPrefix...) // see there: no topic, queue or CommitLog offset
	b = strconv.AppendInt(b, m.QueueOffset, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, m.StoreTimestamp, 10)
	b = append(b, '.')
	b = append(b, m.MsgID...)
	p.num = b
	p.reply = bytesString(b)
}

// handlePull answers a pull inline, or from a long-poll goroutine when it asks to wait and a
// slot is free.
func (s *Service) handlePull(req micro.Request) {
	if !s.enter() {
		s.pullRefused(req, errShuttingDown)
		return
	}
	r, err := decodePull(req.Data())
	reply := req.Reply()
	if reply == "" || reply == s.prefix || strings.HasPrefix(reply, s.prefix+".") {
		// Nowhere to send the messages: none, or the API's own subjects (a pulled body would be
		// taken for a request). Not even the error goes there.
		s.log.Debug().Str("reply", reply).Msg("read API: a pull without a reply subject outside the prefix, ignored")
		s.leave()
		return
	}
	if err == nil && len(reply) > replay.MaxSubjectLen {
		// Each pulled message goes to reply with a reply subject of its own: the protocol line
		// would be longer than the request's, and past the server's max_control_line the server
		// closes the engine's connection. The error alone (no reply subject) fits.
		err = badRequest{fmt.Errorf("reply subject of %d bytes: at most %d for a pull", len(reply), replay.MaxSubjectLen)}
	}
	if err != nil {
		s.pullRefused(req, err)
		s.leave()
		return
	}
	owned := ownsQueue(req, r.QueueID)
	if r.WaitMs > 0 && s.longPoll(func() { s.pull(r, reply, false, owned) }) {
		return
	}
	s.pull(r, reply, r.WaitMs > 0, owned) // no slot free: answered now, without waiting
	s.leave()
}

// pullRefused answers a pull refused before reading with its end message, through micro (which
// counts the error).
func (s *Service) pullRefused(req micro.Request, err error) {
	code := s.code(err)
	s.logRefused(req.Subject(), code, err)
	h := pullEndHeader(api.StatusError, 0, 0)
	h.Set(api.HeaderPullErrorCode, strconv.Itoa(code))
	h.Set(api.HeaderPullError, err.Error())
	if rerr := req.Error(strconv.Itoa(code), err.Error(), nil, micro.WithHeaders(micro.Headers(h))); rerr != nil {
		s.log.Debug().Err(rerr).Str("subject", req.Subject()).Msg("read API: could not answer a pull")
	}
}

func pullEndHeader(status string, next, count int64) nats.Header {
	h := nats.Header{}
	h.Set(api.HeaderPullStatus, status)
	h.Set(api.HeaderPullNextOffset, strconv.FormatInt(next, 10))
	h.Set(api.HeaderPullCount, strconv.FormatInt(count, 10))
	return h
}

// pullScanUnits bounds the units one pull reads past a filter's misses (a tag or subject filter
// that skips most of a queue): a Get stops after 800 of them, and a pull takes Get after Get up
// to this many instead of ending there, so that a consumer of one subject of a wide topic is
// not a round trip per 800 units.
const pullScanUnits = 64 << 10

// pull reads r and sends its messages and then its end message to reply. It never returns an
// error: a failure is told in the end message. owned: as for get.
func (s *Service) pull(r api.PullRequest, reply string, skipWait, owned bool) {
	maxMsgs := api.PullMax(r.Max)
	maxBytes := min(orDefault(r.MaxBytes, api.DefaultPullMaxBytes), api.MaxPullMaxBytes)
	limit := s.replyLimit()
	ph := newPullHeader(s.keys, s.tags)
	out := nats.Msg{Subject: reply}

	var (
		status       reader.Status
		read         bool // a Get returned the queue's bounds: status, lo and hi are set
		lo, hi       int64
		next         = r.Offset
		count, bytes int
		wait         time.Duration
		failed       error
		scanStopped  bool // the last Get stopped at its scan limit before the head
	)
	if !skipWait {
		wait = time.Duration(min(r.WaitMs, api.MaxWaitMs)) * time.Millisecond
	}
	// Get returns 1024 messages at most: a larger pull takes several, the next one from where
	// the last ended, until the bounds are reached or a Get finds nothing more now.
	for count < maxMsgs && bytes < maxBytes {
		gr := reader.GetRequest{Topic: r.Topic, QueueID: r.QueueID, Offset: next, Max: min(maxMsgs-count, reader.MaxGetMax),
			MaxBytes: maxBytes - bytes, Tags: r.Tags, Subject: r.Subject, NoPropertyMap: true, UnknownIsEmpty: owned}
		if count == 0 {
			gr.Wait = wait // only while nothing was found
		}
		res, err := s.e.Get(s.ctx, gr)
		if err == nil || res.MaxOffset > 0 {
			read, status, lo, hi = true, res.Status, res.MinOffset, res.MaxOffset
		}
		scanStopped = res.ScanStopped
		stopped := false
		for i := range res.Messages {
			m := &res.Messages[i]
			if count > 0 && bytes+int(m.Size) > maxBytes {
				next, stopped = m.QueueOffset, true // a later Get's first message, over the bound
				break
			}
			if err := s.pullSend(ph, &out, m, limit); err != nil {
				next, stopped, failed = m.QueueOffset, true, err
				break
			}
			count++
			bytes += int(m.Size)
			next = m.QueueOffset + 1
		}
		if stopped {
			break
		}
		if err != nil {
			// ErrCorrupt comes with the messages before the unit that failed, and NextOffset
			// at it; ctx's end, with the last result.
			next, failed = max(next, res.NextOffset), err
			break
		}
		next = res.NextOffset
		filtered := res.Status == reader.NoMatchedMessage && next-r.Offset < pullScanUnits
		if len(res.Messages) == 0 && !filtered || next >= res.MaxOffset {
			break // nothing more now: the head, a filter's scan limit, deleted records
		}
	}
	if count > 0 {
		status = reader.Found
	}

	h := pullEndHeader(status.String(), next, int64(count))
	if read {
		h.Set(api.HeaderPullMinOffset, strconv.FormatInt(lo, 10))
		h.Set(api.HeaderPullMaxOffset, strconv.FormatInt(hi, 10))
	}
	if skipWait {
		h.Set(api.HeaderPullWaitSkipped, "true")
	}
	var a applied
	a.lower("max", int64(r.Max), int64(maxMsgs))
	a.lower("maxBytes", int64(r.MaxBytes), int64(maxBytes))
	a.lower("waitMs", r.WaitMs, api.MaxWaitMs)
	if len(a) > 0 {
		h.Set(api.HeaderApplied, a.header())
	}
	if scanStopped && failed == nil && count < maxMsgs && bytes < maxBytes && next < hi {
		h.Set(api.HeaderPullScanStopped, "true")
	}
	if failed != nil && s.ctx.Err() != nil {
		failed = errShuttingDown
	}
	if failed != nil {
		code := s.code(failed)
		s.logRefused(api.Subject(s.prefix, api.EndpointPull), code, failed)
		h.Set(api.HeaderPullStatus, api.StatusError)
		h.Set(api.HeaderPullErrorCode, strconv.Itoa(code))
		h.Set(api.HeaderPullError, failed.Error())
		h.Set(micro.ErrorHeader, failed.Error())
		h.Set(micro.ErrorCodeHeader, strconv.Itoa(code))
	}
	if perr := s.nc.PublishMsg(&nats.Msg{Subject: reply, Header: h}); perr != nil {
		s.log.Warn().Err(perr).Str("subject", reply).Msg("read API: could not end a pull")
	}
}

// pullSend publishes m on out (reused: see the hot path above), without its body when body and
// headers would exceed the max payload.
func (s *Service) pullSend(ph *pullHeader, out *nats.Msg, m *reader.Message, limit int) error {
	ph.build(m)
	out.Reply, out.Data = ph.reply, m.Body
	if ph.size+len(m.Body) > limit {
		ph.setInt(api.HeaderPartial, int64(len(m.Body)))
		out.Data = nil
		if ph.size > limit {
			return fmt.Errorf("message %s: %d bytes of headers, more than a NATS message may hold (%d): "+
				"raise the server's max_payload", m.MsgID, ph.size, limit)
		}
	}
	out.Header = ph.header()
	err := s.nc.PublishMsg(out)
	if errors.Is(err, nats.ErrMaxPayload) && out.Data != nil {
		// The max payload shrank (a reconnect to another server): send it without the body.
		ph.setInt(api.HeaderPartial, int64(len(m.Body)))
		out.Data, out.Header = nil, ph.header()
		err = s.nc.PublishMsg(out)
	}
	if err != nil {
		return fmt.Errorf("message %s: %w", m.MsgID, err)
	}
	return nil
}

// header is the headers to publish: nil when there are none, so that nats.go sends the message
// without a header block.
func (p *pullHeader) header() nats.Header {
	if len(p.h) == 0 {
		return nil
	}
	return p.h
}
