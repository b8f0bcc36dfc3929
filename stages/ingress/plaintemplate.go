package ingress

import (
	"cmp"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// maxPlainTemplates bounds a worker's plain templates (about 300 bytes each with a short topic
// and subject): past it the worker forgets them all and starts again, so a subject space wider
// than that costs one full encoding per subject and round instead of memory without bound.
const maxPlainTemplates = 4096

// plainTemplateBudget bounds the plain templates of all workers together (about 10 MiB), so
// that few workers keep more each: every worker sees every subject of a topic (its queues go
// round-robin to consecutive workers), and a space of 10,000 subjects then still fits.
const plainTemplateBudget = 32 << 10

// plainTemplates encode plain messages (no header, from core NATS, neither a pack's entry nor a
// batched-ack stream's: what publishers that know nothing of the engine send) from the record of
// the first such message of their subject a worker encoded in full, as packTemplate does for
// pack entries. Such messages differ only in body, queue, batch time and the UNIQ_KEY generated
// for them, so their properties, header fields, tag code and the hash prefix of their index key
// are worked out once per subject instead of once per message. The bytes and the index are those
// of encodeInto's full path (TestPlainTemplateMatchesFullEncoding).
type plainTemplates struct {
	// byRoute holds a template per route; a Route is made for one subject (route.Router
	// caches them by subject), so the route says the subject too.
	byRoute map[*route.Route]*plainTemplate
	// once holds the routes encoded in full once, without a template: a template is made at a
	// route's second message, so a wide subject space whose subjects come back only after
	// thousands of others (device.<id>.temp) pays for no template it never uses. Bounded as
	// byRoute.
	once map[*route.Route]struct{}
	key  []byte // the generated key of the message being encoded
	max  int    // of byRoute and of once; 0 is maxPlainTemplates
}

// plainTemplate is the template of one subject's plain messages.
type plainTemplate struct {
	rec  commitlog.RecordTemplate
	born int64 // the BORNTIMESTAMP rec has now
	// index is the first message's; its unique key's hash (Hashes[0], when it has one) is
	// worked out again for each message's key.
	index stages.RecordIndex
}

// plainTemplated says whether j (with sequence header seq) is a message plainTemplates encode.
func plainTemplated(j *job, seq *wire.SeqHeader) bool {
	return j.msg.Header == nil && j.pack == nil && seq == nil && j.origin == nil
}

// limit is how many templates, and routes seen once, ts keeps.
func (ts *plainTemplates) limit() int { return cmp.Or(ts.max, maxPlainTemplates) }

// of is the template of rt's plain messages, or nil.
func (ts *plainTemplates) of(rt *route.Route) *plainTemplate { return ts.byRoute[rt] }

// reset makes a template of the plain messages routed like j from the one just encoded in full:
// rec, from the properties props built by b (whose genAt places the generated UNIQ_KEY), at the
// route's second such message. When no template can be made of it, there is none, and the next
// message is encoded in full too.
func (ts *plainTemplates) reset(j *job, born int64, rec, props []byte, b *propBuilder, opt commitlog.EncodeOptions) {
	if b.genAt < 0 || len(b.extra) > 0 {
		return
	}
	t := ts.byRoute[j.route]
	if t == nil {
		if _, ok := ts.once[j.route]; !ok {
			if ts.once == nil || len(ts.once) >= ts.limit() {
				ts.once = make(map[*route.Route]struct{})
			}
			ts.once[j.route] = struct{}{}
			return
		}
		delete(ts.once, j.route)
		if ts.byRoute == nil || len(ts.byRoute) >= ts.limit() {
			ts.byRoute = make(map[*route.Route]*plainTemplate)
		}
		t = &plainTemplate{}
	}
	if err := t.rec.Reset(rec, props, b.genAt, b.gen.Len(), opt); err != nil {
		delete(ts.byRoute, j.route)
		return
	}
	t.born, t.index = born, b.index
	ts.byRoute[j.route] = t
}

// fromPlainTemplate builds the record of the plain message j, born at born, from t in r (as
// encodeInto does).
func (w *worker) fromPlainTemplate(t *plainTemplate, r *stages.Record, j *job, born int64) error {
	if t.born != born {
		t.rec.SetBorn(born)
		t.born = born
	}
	key := w.props.gen.AppendAt(w.plain.key[:0], w.props.bornAt)
	w.plain.key = key
	body := j.msg.Data
	free := w.arenaTail(t.rec.Len(len(body), len(key)))
	rec, err := t.rec.Append(free, j.queue, body, key)
	if err != nil {
		return err
	}
	w.keep(free, rec)
	rt := j.route
	r.Bytes = rec[:len(rec):len(rec)]
	r.Topic, r.QueueID, r.PropCRC = rt.Topic, j.queue, w.in.cfg.Encode.PropCRC
	r.Reply, r.Index = j.msg.Reply, t.index
	if t.index.Known && t.index.NHashes > 0 {
		r.Index.Hashes[0] = javahash.IndexHash(javahash.ContinueBytes(rt.IndexPrefix, key))
	}
	return nil
}
