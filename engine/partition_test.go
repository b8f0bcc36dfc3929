package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/monitor"
	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Partitioned ingest on a NATS cluster (docs/SCALE-OUT.md): three servers joined by routes, the
// same partition mapping on each, three engines on three servers each owning a third of the
// partitions, publishers on every server.

const (
	partCount  = 8
	partSource = "orders.*"
)

// partCluster starts the servers with the mapping of partSource into partCount partitions.
func partCluster(t *testing.T) *natstest.Cluster {
	dest, err := route.PartitionMapping(route.DefaultPartitionPrefix, partCount, partSource)
	if err != nil {
		t.Fatal(err)
	}
	return natstest.StartCluster(t, 3, map[string]string{partSource: dest})
}

// owned is engine i's share of the partitions: those equal to i mod 3.
func owned(i int) []int {
	var out []int
	for p := i; p < partCount; p += 3 {
		out = append(out, p)
	}
	return out
}

// servePartitions starts an engine on dir, connected to url, owning parts; it waits until every
// server of c knows its subscriptions.
func servePartitions(t *testing.T, c *natstest.Cluster, url, dir string, parts []int) *served {
	t.Helper()
	opts := testOptions(t, dir)
	opts.FlushMode = FlushAsync
	s := serve(t, opts, NATSOptions{URL: url, TopicTokens: 1,
		Partitions: &route.Partitions{Count: partCount, Owned: parts}})
	for _, p := range parts {
		c.WaitInterest(route.PartitionSubject(route.DefaultPartitionPrefix, p) + ".orders.x")
	}
	return s
}

// partMsg is publisher pub's message n, for key.
func partMsg(pub, n int, key string) *nats.Msg {
	m := nats.NewMsg("orders." + key)
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("p%d-%d", pub, n))
	m.Data = fmt.Appendf(nil, "%d|%d|%s", pub, n, key)
	return m
}

// publishPipelined sends msgs on nc, all at once (in order, over one connection), with replies to
// an inbox of its own, and returns the replies, in msgs' order.
func publishPipelined(t *testing.T, nc *nats.Conn, msgs []*nats.Msg) []*nats.Msg {
	t.Helper()
	inbox := nc.NewInbox()
	replies := make(chan *nats.Msg, len(msgs))
	sub, err := nc.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for i, m := range msgs {
		m.Reply = inbox + "." + strconv.Itoa(i)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]*nats.Msg, len(msgs))
	deadline := time.NewTimer(serveTimeout)
	defer deadline.Stop()
	for range msgs {
		select {
		case r := <-replies:
			i, _ := strconv.Atoi(r.Subject[len(inbox)+1:])
			out[i] = r
		case <-deadline.C:
			t.Fatal("replies missing")
		}
	}
	return out
}

// ordersQueue is queue q of topic orders in e, once everything written is dispatched (a zero
// QueueOffsets when e has no such queue).
func ordersQueue(t *testing.T, e *Engine, q int32) QueueOffsets {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	qs, _ := e.QueueOffsets("orders")
	for _, o := range qs {
		if o.QueueID == q {
			return o
		}
	}
	return QueueOffsets{}
}

// partStored is what one engine stored, read back queue by queue in offset order.
type partStored struct {
	queue int32
	body  string
	id    string
	subj  string
}

// countStored is how often each message id is stored over the engines' partition queues.
func countStored(t *testing.T, engines ...*served) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, s := range engines {
		for _, m := range readPartitions(t, s.Engine) {
			seen[m.id]++
		}
	}
	return seen
}

// checkStoredOnce fails unless the engines hold want distinct messages, each exactly once.
func checkStoredOnce(t *testing.T, want int, engines ...*served) {
	t.Helper()
	seen := countStored(t, engines...)
	if len(seen) != want {
		t.Fatalf("%d messages stored, want %d", len(seen), want)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s stored %d times", id, k)
		}
	}
}

func readPartitions(t *testing.T, e *Engine) []partStored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	var out []partStored
	for _, ti := range e.Topics() {
		qs, err := e.QueueOffsets(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, qo := range qs {
			q := qo.QueueID
			for off := qo.Min; ; {
				res, err := e.Get(ctx, GetRequest{Topic: ti.Name, QueueID: q, Offset: off, Max: 1024, MaxBytes: 8 << 20})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Messages) == 0 {
					break
				}
				for _, m := range res.Messages {
					if m.Topic != "orders" {
						t.Fatalf("topic %q", m.Topic)
					}
					out = append(out, partStored{queue: m.QueueID, body: string(m.Body), id: m.UniqKey,
						subj: m.Properties[ingress.PropNatsSubject]})
				}
				off = res.NextOffset
			}
		}
	}
	return out
}

// TestPartitionedIngestCluster: every message is stored exactly once, by its partition's owner,
// in the queue of its partition (FNV-1a of the key mod P, as the server's mapping computes it),
// with the publisher's subject, and in each publisher's order per key, although publishers and
// engines sit on different servers. Then an engine is stopped: a request for one of its
// partitions gets no responders at once, and once the engine is back (on another server) the
// retry with the same Nats-Msg-Id is stored, once.
func TestPartitionedIngestCluster(t *testing.T) {
	const pubs, perPub, keys = 3, 400, 40
	c := partCluster(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	engines := make([]*served, 3)
	for i := range engines {
		engines[i] = servePartitions(t, c, c.URL(i), dirs[i], owned(i))
	}
	for p := range pubs {
		nc, err := nats.Connect(c.URL((p+1)%3), nats.Name(fmt.Sprintf("pub-%d", p)))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		msgs := make([]*nats.Msg, perPub)
		for n := range msgs {
			msgs[n] = partMsg(p, n, fmt.Sprintf("k%d", (n*7+p)%keys))
		}
		for i, r := range publishPipelined(t, nc, msgs) {
			if a, err := wire.ParseReply(r.Data); err != nil || a.Topic != "orders" {
				t.Fatalf("publisher %d message %d: %+v, %v", p, i, a, err)
			}
		}
	}

	seen := map[string]int{}
	for i, s := range engines {
		stored := readPartitions(t, s.Engine)
		last := map[string]int{} // "pub|key" -> last n
		for _, m := range stored {
			f := strings.Split(m.body, "|")
			pub, _ := strconv.Atoi(f[0])
			n, _ := strconv.Atoi(f[1])
			key := f[2]
			want := route.PartitionOf(key, partCount)
			if int(m.queue) != want || want%3 != i {
				t.Fatalf("engine %d stored key %s in queue %d; its partition is %d (engine %d)", i, key, m.queue, want, want%3)
			}
			if m.subj != "orders."+key || m.id != fmt.Sprintf("p%d-%d", pub, n) {
				t.Fatalf("engine %d: subject %q, id %q for %s", i, m.subj, m.id, m.body)
			}
			k := f[0] + "|" + key
			if prev, ok := last[k]; ok && n <= prev {
				t.Fatalf("engine %d: publisher %d key %s: message %d stored after %d", i, pub, key, n, prev)
			}
			last[k] = n
			seen[m.id]++
		}
		t.Logf("engine %d (partitions %v) stored %d messages", i, owned(i), len(stored))
	}
	if len(seen) != pubs*perPub {
		t.Fatalf("%d distinct messages stored, want %d", len(seen), pubs*perPub)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s stored %d times", id, n)
		}
	}

	// Engine 2 stops: its partitions have no subscriber anywhere.
	if err := engines[2].shutdown(); err != nil {
		t.Fatal(err)
	}
	p2 := owned(2)[0]
	c.WaitNoInterest(route.PartitionSubject(route.DefaultPartitionPrefix, p2) + ".orders.x")
	key := ""
	for k := range 1000 {
		if route.PartitionOf(fmt.Sprintf("r%d", k), partCount) == p2 {
			key = fmt.Sprintf("r%d", k)
			break
		}
	}
	nc, err := nats.Connect(c.URL(0), nats.Name("retrier"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	retry := partMsg(9, 0, key)
	if _, err := nc.RequestMsg(retry, serveTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("partition %d without its engine: %v, want no responders", p2, err)
	}
	// Back, on another server: the retry is stored once, and a second retry is a duplicate.
	engines[2] = servePartitions(t, c, c.URL(1), dirs[2], owned(2))
	for range 2 {
		r, err := nc.RequestMsg(partMsg(9, 0, key), serveTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := wire.ParseReply(r.Data); err != nil || a.QueueID != int32(p2) {
			t.Fatalf("retry: %+v, %v", a, err)
		}
	}
	n := 0
	for _, m := range readPartitions(t, engines[2].Engine) {
		if m.id == "p9-0" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the retried message is stored %d times", n)
	}
}

// TestPartitionSubscriptions: an engine subscribes to its partitions only: a message for one of
// them is stored in the partition's queue; one for another partition, or with a partition
// number in another spelling, finds no responder (ingress refuses such a message with a 503 if it
// comes all the same: see the ingress tests).
func TestPartitionSubscriptions(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir()), NATSOptions{NoReadAPI: true,
		Partitions: &route.Partitions{Count: 4, Owned: []int{0, 1}}})
	nc := connect(t, s, "pub")
	for _, c := range []struct {
		subject string
		code    int
	}{
		{"rmq.p.1.orders.a", 0},
		{"rmq.p.01.orders.a", -1}, // not subscribed: no responders
		{"rmq.p.2.orders.a", -1},
	} {
		r, err := nc.Request(c.subject, []byte("x"), serveTimeout)
		switch {
		case c.code == -1:
			if !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("%s: %v, want no responders", c.subject, err)
			}
			continue
		case err != nil:
			t.Fatalf("%s: %v", c.subject, err)
		}
		a, err := wire.ParseReply(r.Data)
		if err != nil || a.QueueID != 1 {
			t.Errorf("%s: %+v, %v", c.subject, a, err)
		}
	}
	if got := s.subjects(); len(got) != 2 || got[0] != "rmq.p.0.>" || got[1] != "rmq.p.1.>" {
		t.Errorf("subjects %v", got)
	}
	if p := monitor.NATSStatus(s.Server).Partitions; p == nil || p.Count != 4 || len(p.Owned) != 2 || p.Mode != "single-copy" || p.Ownership != "config" {
		t.Errorf("status partitions %+v", p)
	}
}

// TestPartitionedReads: reads over the cluster of partitioned engines equal those of one engine
// that owns every partition and took the same messages (its own embedded server, partitioning
// with --partition-subjects): fan-out offsets, topics and queries by key, queue reads routed to
// the owner, a key query routed to the key's partition. With an engine stopped, a fan-out query
// answers partially, naming that engine's partitions.
func TestPartitionedReads(t *testing.T) {
	const n, keys = 300, 20
	c := partCluster(t)
	engines := make([]*served, 3)
	for i := range engines {
		engines[i] = servePartitions(t, c, c.URL(i), t.TempDir(), owned(i))
	}
	all := make([]int, partCount)
	for p := range all {
		all[p] = p
	}
	refOpts := testOptions(t, t.TempDir())
	refOpts.FlushMode = FlushAsync
	ref := serve(t, refOpts, NATSOptions{TopicTokens: 1, PartitionSources: []string{partSource},
		Partitions: &route.Partitions{Count: partCount, Owned: all}})

	msgs := func() []*nats.Msg {
		out := make([]*nats.Msg, n)
		for i := range out {
			key := fmt.Sprintf("k%d", i%keys)
			out[i] = partMsg(0, i, key)
			out[i].Header.Set(ingress.DefaultKeysHeader, key)
		}
		return out
	}
	pubCluster, err := nats.Connect(c.URL(1))
	if err != nil {
		t.Fatal(err)
	}
	defer pubCluster.Close()
	publishPipelined(t, pubCluster, msgs())
	publishPipelined(t, connect(t, ref, "ref-pub"), msgs())
	for _, s := range append(slices.Clone(engines), ref) {
		ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
		if err := s.Engine.WaitDispatched(ctx, s.Engine.Offsets().Written); err != nil {
			t.Fatal(err)
		}
		cancel()
	}

	ncc, err := nats.Connect(c.URL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer ncc.Close()
	cl := api.NewClient(ncc, api.WithPartitions(partCount))
	rc := api.NewClient(connect(t, ref, "ref-reader"))
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()

	gotOffsets, err := cl.OffsetsAll(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets, err := rc.Offsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(gotOffsets.Queues, wantOffsets.Queues, func(a, b api.QueueOffsets) bool {
		return a.QueueID == b.QueueID && a.MinOffset == b.MinOffset && a.MaxOffset == b.MaxOffset
	}) {
		t.Fatalf("offsets: fan-out %+v, one engine %+v", gotOffsets.Queues, wantOffsets.Queues)
	}
	gotTopics, err := cl.TopicsAll(ctx, api.TopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantTopics, err := rc.Topics(ctx, api.TopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotTopics.Topics) != 1 || len(wantTopics.Topics) != 1 || gotTopics.Topics[0].Name != "orders" ||
		!slices.Equal(gotTopics.Topics[0].Queues, wantTopics.Topics[0].Queues) {
		t.Fatalf("topics: fan-out %+v, one engine %+v", gotTopics.Topics, wantTopics.Topics)
	}

	ids := func(ms []api.Message) map[string][2]int64 {
		out := map[string][2]int64{}
		for _, m := range ms {
			out[m.UniqKey] = [2]int64{int64(m.QueueID), m.QueueOffset}
		}
		return out
	}
	for k := range 4 {
		key := fmt.Sprintf("k%d", k)
		req := api.QueryRequest{Topic: "orders", Key: key}
		want, err := rc.Query(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cl.QueryAll(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		routed, err := cl.QueryKey(ctx, key, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Messages) != n/keys || !maps.Equal(ids(got.Messages), ids(want.Messages)) ||
			!maps.Equal(ids(routed.Messages), ids(want.Messages)) {
			t.Fatalf("query %s: fan-out %v, routed %v, one engine %v", key, ids(got.Messages), ids(routed.Messages), ids(want.Messages))
		}
	}
	for q := range int32(partCount) {
		req := api.GetRequest{Topic: "orders", QueueID: q, Offset: 0, Max: n}
		got, err := cl.Get(ctx, req)
		if err != nil {
			t.Fatalf("queue %d: %v", q, err)
		}
		want, err := rc.Get(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(ids(got.Messages), ids(want.Messages)) {
			t.Fatalf("queue %d: routed get %v, one engine %v", q, ids(got.Messages), ids(want.Messages))
		}
	}

	// By time: the first offset at or after a time, for every partition, from every engine.
	for _, ts := range []int64{0, time.Now().Add(time.Hour).UnixMilli()} {
		at, err := cl.OffsetsForTimeAll(ctx, "orders", ts)
		if err != nil {
			t.Fatal(err)
		}
		if len(at.Queues) != len(gotOffsets.Queues) {
			t.Fatalf("offsets for time %d: %+v", ts, at.Queues)
		}
		for i, q := range at.Queues {
			want := gotOffsets.Queues[i].MinOffset
			if ts > 0 {
				want = gotOffsets.Queues[i].MaxOffset
			}
			routed, err := cl.OffsetForTime(ctx, api.OffsetForTimeRequest{Topic: "orders", QueueID: q.QueueID, Timestamp: ts})
			if err != nil {
				t.Fatal(err)
			}
			if q.Offset != want || routed != want {
				t.Fatalf("queue %d at %d: fan-out %d, routed %d, want %d", q.QueueID, ts, q.Offset, routed, want)
			}
		}
	}

	// Engine 1 stops: the fan-out answers without its partitions, and says so.
	if err := engines[1].shutdown(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	got, err := cl.QueryAll(short, api.QueryRequest{Topic: "orders", Key: "k0"})
	var pe *api.PartialError
	if !errors.As(err, &pe) || !slices.Equal(pe.Missing, owned(1)) || pe.Count != partCount {
		t.Fatalf("with engine 1 stopped: %v, want a partial answer missing %v", err, owned(1))
	}
	for _, m := range got.Messages {
		if int(m.QueueID)%3 == 1 {
			t.Fatalf("a message of a stopped engine's partition: %+v", m)
		}
	}
}

// requestRetrying sends m until an engine acks it: a request that finds no responder (the
// partition's engine is reconnecting) or gets no reply in time (lost with a server) is sent again
// with the same Nats-Msg-Id, a few milliseconds later, at most for serveTimeout.
func requestRetrying(t *testing.T, nc *nats.Conn, m *nats.Msg) wire.Ack {
	t.Helper()
	deadline := time.Now().Add(serveTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := nc.RequestMsg(m, time.Second)
		if err == nil {
			a, err := wire.ParseReply(r.Data)
			if err != nil {
				t.Fatalf("%s: %v", m.Header.Get(nats.MsgIdHdr), err)
			}
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no ack: %v", m.Header.Get(nats.MsgIdHdr), err)
		}
		<-tick.C
	}
}

// TestPartitionedServerLoss: single-copy mode, one of the three NATS servers is killed while
// publishers go on: the engine that was connected to it reconnects to another server (nats.go
// learned the cluster's URLs), its partitions answer again, and publishers that got no answer in
// the meantime retried with their Nats-Msg-Id. Every acknowledged message is stored once: no
// duplicate in any ConsumeQueue.
func TestPartitionedServerLoss(t *testing.T) {
	const perPhase, keys = 150, 30
	c := partCluster(t)
	engines := make([]*served, 3)
	for i := range engines {
		opts := testOptions(t, t.TempDir())
		opts.FlushMode = FlushAsync
		engines[i] = serve(t, opts, NATSOptions{URL: c.URL(i), TopicTokens: 1, NoReadAPI: true,
			ReconnectWait: 20 * time.Millisecond, Partitions: &route.Partitions{Count: partCount, Owned: owned(i)}})
	}
	for p := range partCount {
		c.WaitInterest(route.PartitionSubject(route.DefaultPartitionPrefix, p) + ".orders.x")
	}
	nc, err := nats.Connect(c.URL(1)+","+c.URL(0), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	acked := map[string]bool{}
	publish := func(from, to int) {
		for n := from; n < to; n++ {
			m := partMsg(0, n, fmt.Sprintf("k%d", n%keys))
			requestRetrying(t, nc, m)
			acked[m.Header.Get(nats.MsgIdHdr)] = true
		}
	}
	publish(0, perPhase)
	c.Kill(2) // engine 2's server
	publish(perPhase, 2*perPhase)
	if u := engines[2].ClientURL(); u == c.URL(2) || u == "" {
		t.Fatalf("engine 2 is on %q, its server was %s", u, c.URL(2))
	}

	stored := map[string]int{}
	for i, s := range engines {
		for _, m := range readPartitions(t, s.Engine) {
			stored[m.id]++
			if want := route.PartitionOf(strings.Split(m.body, "|")[2], partCount); int(m.queue) != want || want%3 != i {
				t.Fatalf("engine %d stored %s in queue %d (partition %d)", i, m.id, m.queue, want)
			}
		}
	}
	for id := range acked {
		if stored[id] != 1 {
			t.Fatalf("acknowledged %s stored %d times", id, stored[id])
		}
	}
	if len(stored) != len(acked) {
		t.Fatalf("%d messages stored, %d acknowledged", len(stored), len(acked))
	}
}
