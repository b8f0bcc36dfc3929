package benchmarks

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// The storage-free responder: the ceiling of issue 28's reads. An embedded nats-server, as the
// engine's, and one connection that answers $RS.API.offsets, $RS.API.pull and $RS.API.read for
// a topic of Queues x PerQueue messages in exactly the shapes the engine answers them, from
// records held in memory: what reading costs NATS and a client when storage costs nothing. Its
// records are real ones, taken from the engine with one batched read at its start.

// g28ResponderConfig configures the responder.
type g28ResponderConfig struct {
	// EngineURL and Topic: where its records come from (one batched read of queue 0).
	EngineURL string `json:"engine_url"`
	Topic     string `json:"topic"`
	// Ends are the queues' end offsets (queue i has Ends[i] messages).
	Ends []int64 `json:"ends"`
}

// responder answers from template records.
type responder struct {
	cfg     g28ResponderConfig
	nc      *nats.Conn
	records [][]byte // each one record as stored
	bodies  [][]byte
	buf     []byte
}

func g28ResponderMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28ResponderConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	r := &responder{cfg: cfg}
	if err := r.loadRecords(cfg.EngineURL, cfg.Topic); err != nil {
		return err
	}
	ns, err := startServer(c.log)
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if r.nc, err = nats.Connect(ns.ClientURL(), nats.Name("bench-responder")); err != nil {
		return err
	}
	defer r.nc.Close()
	for subj, fn := range map[string]nats.MsgHandler{"$RS.API.offsets": r.offsets, "$RS.API.pull": r.pull, "$RS.API.read": r.read} {
		sub, err := r.nc.Subscribe(subj, fn)
		if err != nil {
			return err
		}
		_ = sub.SetPendingLimits(-1, -1)
	}
	if err := r.nc.Flush(); err != nil {
		return err
	}
	if err := c.send(g28Line{Ready: true, URL: ns.ClientURL()}); err != nil {
		return err
	}
	_ = c.await(ctx, "stop")
	return nil
}

// loadRecords takes up to 4096 records of queue 0 from the engine, with the documented batched
// read.
func (r *responder) loadRecords(url, topic string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	req, _ := json.Marshal(map[string]any{"topic": topic, "queues": []map[string]any{{"queueId": 0, "offset": 0}}, "max": 4096})
	m, err := nc.Request("$RS.API.read", req, 10*time.Second)
	if err != nil {
		return err
	}
	if m.Header.Get("Rs-Read-Status") != "OK" {
		return fmt.Errorf("read: %s", m.Header.Get("Rs-Error"))
	}
	b := m.Data[4+37:]
	_, err = parseReadBody(m.Data, func(body []byte) {
		size := int(binary.BigEndian.Uint32(b))
		r.records = append(r.records, b[:size])
		r.bodies = append(r.bodies, body)
		b = b[size:]
	})
	if err == nil && len(r.records) == 0 {
		err = errors.New("the engine's topic has no records")
	}
	return err
}

func (r *responder) offsets(m *nats.Msg) {
	type q struct {
		ID  int   `json:"queueId"`
		Min int64 `json:"minOffset"`
		Max int64 `json:"maxOffset"`
	}
	out := struct {
		Topic  string `json:"topic"`
		Queues []q    `json:"queues"`
	}{Topic: r.cfg.Topic}
	for i, end := range r.cfg.Ends {
		out.Queues = append(out.Queues, q{ID: i, Max: end})
	}
	b, _ := json.Marshal(out)
	_ = m.Respond(b)
}

// request is what pull and read ask (the fields the docs clients send).
type request struct {
	QueueID int32 `json:"queueId"`
	Offset  int64 `json:"offset"`
	Max     int   `json:"max"`
	Queues  []struct {
		QueueID int32 `json:"queueId"`
		Offset  int64 `json:"offset"`
	} `json:"queues"`
}

// pull sends each message on the reply subject with the headers the engine's pull carries for
// these records (Rs-Subject, Nats-Msg-Id) and a $RS.PULL reply subject, then the end message.
func (r *responder) pull(m *nats.Msg) {
	var req request
	if json.Unmarshal(m.Data, &req) != nil || m.Reply == "" {
		return
	}
	n := min(int64(cmpOrInt(req.Max, 256)), r.end(req.QueueID)-req.Offset)
	out := nats.Msg{Subject: m.Reply, Header: nats.Header{}}
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	id := make([]byte, 32)
	for i := range max(n, 0) {
		off := req.Offset + i
		rec := r.records[int(off)%len(r.records)]
		hex.Encode(id, rec[20:36]) // a message id's length, from the record's bytes
		out.Reply = "$RS.PULL." + strconv.FormatInt(off, 10) + "." + ts + "." + string(id)
		out.Header.Set("Rs-Subject", "bench.t0")
		out.Header.Set("Nats-Msg-Id", string(id[:24]))
		out.Data = r.bodies[int(off)%len(r.bodies)]
		_ = r.nc.PublishMsg(&out)
	}
	h := nats.Header{}
	h.Set("Rs-Pull-Status", "FOUND")
	h.Set("Rs-Pull-Next-Offset", strconv.FormatInt(req.Offset+max(n, 0), 10))
	h.Set("Rs-Pull-Count", strconv.FormatInt(max(n, 0), 10))
	_ = r.nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: h})
}

// read answers a batched read of one queue: RSR1, the section, the records back to back.
func (r *responder) read(m *nats.Msg) {
	var req request
	if json.Unmarshal(m.Data, &req) != nil || m.Reply == "" || len(req.Queues) != 1 {
		return
	}
	q := req.Queues[0]
	n := max(min(int64(cmpOrInt(req.Max, 1024)), r.end(q.QueueID)-q.Offset), 0)
	b := append(r.buf[:0], "RSR1"...)
	b = binary.BigEndian.AppendUint32(b, uint32(q.QueueID))
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(q.Offset+n))
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(r.end(q.QueueID)))
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	lenAt := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	for i := range n {
		b = append(b, r.records[int(q.Offset+i)%len(r.records)]...)
	}
	binary.BigEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
	r.buf = b
	h := nats.Header{}
	h.Set("Rs-Read-Status", "OK")
	_ = r.nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: h, Data: b})
}

// end is queue q's end offset (0 for a queue it does not have).
func (r *responder) end(q int32) int64 {
	if q < 0 || int(q) >= len(r.cfg.Ends) {
		return 0
	}
	return r.cfg.Ends[q]
}

func cmpOrInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
