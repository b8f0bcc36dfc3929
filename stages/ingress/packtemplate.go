package ingress

import (
	"strconv"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// packTemplate encodes the entries of a pack that carry no headers of their own (what a
// publisher batching small messages sends) from the record of the first such entry a worker
// encoded (commitlog.RecordTemplate). Such entries differ only in body, queue and the sequence in
// their UNIQ_KEY ("<stream>:<seq>"): their properties, header fields and index keys are worked
// out once per pack and batch instead of once per message, which was most of a worker's time per
// message. The bytes and the index are those of encodeInto's full path
// (TestPackTemplateMatchesFullEncoding).
type packTemplate struct {
	// The template holds for entries of pack, routed by route, in a batch born at born: the
	// rest of what a record holds is the worker's configuration, which does not change.
	pack  *batched.Pack
	route *route.Route
	born  int64
	rec   commitlog.RecordTemplate
	// index is the first entry's; when it holds the unique key's hash (Hashes[0]), uniqHash is
	// the Java hash state after "topic#<stream>:", which each entry continues with its digits.
	index    stages.RecordIndex
	uniqHash int32
	// digits are the decimal digits of seq, the sequence last encoded: the next one's are
	// these plus one, in place (a run's sequences are consecutive; formatting each was 2% of
	// the engine).
	digits []byte
	seq    uint64
}

// templated says whether the entry j (with sequence seq) is one a template may encode.
func templated(j *job, seq *wire.SeqHeader) bool {
	return j.pack != nil && seq != nil && j.msg.Header == nil && j.origin == nil
}

// holds says whether t is the template of an entry of pack, routed by rt, born at born.
func (t *packTemplate) holds(pack *batched.Pack, rt *route.Route, born int64) bool {
	return t.pack == pack && t.route == rt && t.born == born && t.rec.Ok()
}

// reset makes t the template of the entries like the one just encoded in full: rec, from the
// properties props built by b (whose seqAt places the sequence) for sequence seq. When no
// template can be made of it, t holds none, and every entry is encoded in full.
func (t *packTemplate) reset(j *job, born int64, seq *wire.SeqHeader, rec, props []byte, b *propBuilder, opt commitlog.EncodeOptions) {
	t.pack, t.route, t.born = nil, nil, 0
	if b.seqAt < 0 || len(b.extra) > 0 {
		return
	}
	t.digits, t.seq = strconv.AppendUint(t.digits[:0], seq.Seq, 10), seq.Seq
	if err := t.rec.Reset(rec, props, b.seqAt, len(t.digits), opt); err != nil {
		return
	}
	t.pack, t.route, t.born, t.index = j.pack, j.route, born, b.index
	if t.index.Known && t.index.NHashes > 0 {
		t.uniqHash = javahash.Continue(j.route.IndexPrefix, seq.Stream)
		t.uniqHash = javahash.Continue(t.uniqHash, ":")
	}
}

// fromTemplate builds the record of entry j, with sequence seq, in r (as encodeInto does).
func (w *worker) fromTemplate(r *stages.Record, j *job, seq *wire.SeqHeader) error {
	t := &w.tmpl
	if seq.Seq == t.seq+1 {
		t.digits = incDecimal(t.digits)
	} else {
		t.digits = strconv.AppendUint(t.digits[:0], seq.Seq, 10)
	}
	t.seq = seq.Seq
	body := j.msg.Data
	free := w.arenaTail(t.rec.Len(len(body), len(t.digits)))
	rec, err := t.rec.Append(free, j.queue, body, t.digits)
	if err != nil {
		return err
	}
	w.keep(free, rec)
	r.Bytes = rec[:len(rec):len(rec)]
	r.Topic, r.QueueID, r.PropCRC = j.route.Topic, j.queue, w.in.cfg.Encode.PropCRC
	r.Reply, r.Index = j.msg.Reply, t.index
	if t.index.Known && t.index.NHashes > 0 {
		r.Index.Hashes[0] = javahash.IndexHash(javahash.ContinueBytes(t.uniqHash, t.digits))
	}
	return nil
}

// incDecimal adds one to the decimal number d, in place (a new digit in front after all nines).
func incDecimal(d []byte) []byte {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] < '9' {
			d[i]++
			return d
		}
		d[i] = '0'
	}
	return append(append(d[:0:0], '1'), d...)
}
