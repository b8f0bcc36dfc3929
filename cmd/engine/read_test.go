package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// Tests of the read commands: an engine served in this process (embedded nats-server on a
// random loopback port, small files) stores messages published with acks; each command then
// reads them back offline (the same store directory, while the engine runs and after it
// stopped) and online (the engine's read API), through kong's parsing as on the command line,
// writing to buffers. Nothing sleeps: every wait is for a reply or a channel, bounded.

// Sizes of the stores these tests write, passed to the commands as to run.
const (
	rdSegment = 1 << 20
	rdUnits   = 64
	rdSlots   = 64
	rdEntries = 512
	rdMaxBody = 256 << 10
	// rdBigBody is too large for one reply once in base64 (the server's max payload is
	// rdMaxBody + 64 KiB): the API sends it without its body, and the CLI reads it in ranges.
	rdBigBody = 250 << 10
)

const rdTimeout = 60 * time.Second

// rdFixture is a served engine, its store and what was published to it.
type rdFixture struct {
	dir     string
	srv     *engine.Server
	url     string
	nc      *nats.Conn
	stopped bool

	acks []wire.Ack // of orders.eu, in publish order
	msgs []*nats.Msg
	big  wire.Ack // of big.one
}

const rdOrders = 20

// rdOrder is message i of orders.eu: tags a and b alternating, keys, a header, and a binary
// body for i = 7.
func rdOrder(i int) *nats.Msg {
	m := nats.NewMsg("orders.eu")
	m.Data = fmt.Appendf(nil, "order %03d: {\"amount\":%d}", i, i*10)
	if i == 7 {
		m.Data = []byte{0, 1, 2, 0xff, 0xfe}
	}
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("id-%03d", i))
	m.Header.Set(ingress.DefaultKeysHeader, fmt.Sprintf("order-%03d common", i))
	m.Header.Set(ingress.DefaultTagsHeader, []string{"a", "b"}[i%2])
	m.Header.Set("X-Note", fmt.Sprintf("note %d", i))
	return m
}

func startReadEngine(t *testing.T) *rdFixture {
	t.Helper()
	t.Setenv("NATS_URL", "") // the tests say where to read
	f := &rdFixture{dir: t.TempDir()}
	srv, err := engine.Serve(engine.Options{
		Dir: f.dir, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		CommitLogFileSize: rdSegment, ConsumeQueueUnits: rdUnits, IndexSlots: rdSlots, IndexEntries: rdEntries,
		MaxBodySize: rdMaxBody,
	}, engine.NATSOptions{Listen: "127.0.0.1:-1", QueuesPerTopic: 2})
	if err != nil {
		t.Fatal(err)
	}
	f.srv, f.url = srv, srv.ClientURL()
	t.Cleanup(func() { f.stop(t) })
	if f.nc, err = nats.Connect(f.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.nc.Close)
	for i := range rdOrders {
		m := rdOrder(i)
		f.msgs = append(f.msgs, m)
		f.acks = append(f.acks, f.publish(t, m))
	}
	big := nats.NewMsg("big.one")
	big.Data = bytes.Repeat([]byte("0123456789abcdef"), rdBigBody/16)
	f.big = f.publish(t, big)
	return f
}

// publish stores m with an ack and waits until readers see it.
func (f *rdFixture) publish(t testing.TB, m *nats.Msg) wire.Ack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rdTimeout)
	defer cancel()
	reply, err := f.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := wire.ParseReply(reply.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Engine.WaitDispatched(ctx, ack.CommitLogOffset+1); err != nil {
		t.Fatal(err)
	}
	return ack
}

func (f *rdFixture) stop(t testing.TB) {
	if f.stopped {
		return
	}
	f.stopped = true
	if err := f.srv.Shutdown(); err != nil {
		t.Error(err)
	}
}

// storeArgs read the store offline, its sizes read from its files.
func (f *rdFixture) storeArgs() []string { return []string{"--store", f.dir} }

func (f *rdFixture) natsArgs() []string { return []string{"--nats", f.url} }

// ordersIn lists the indexes of the orders stored in queue q, by queue offset.
func (f *rdFixture) ordersIn(q int32) []int {
	var out []int
	for i, a := range f.acks {
		if a.QueueID == q {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b int) int { return int(f.acks[a].QueueOffset - f.acks[b].QueueOffset) })
	return out
}

// readCLI parses args as the command line and runs the read command, returning its exit code
// and output. A parse error is a usage error (main exits 2 on it).
func readCLI(t testing.TB, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	var c cli
	parser, err := kong.New(&c, kong.Name("engine"), kong.Writers(&stdout, &stderr),
		kong.Exit(func(code int) { panic(fmt.Sprintf("kong exit %d", code)) }))
	if err != nil {
		t.Error(err)
		return -1, "", ""
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintln(&stderr, err)
		return readUsageExit, stdout.String(), stderr.String()
	}
	cmd, ok := kctx.Selected().Target.Addr().Interface().(readCommand)
	if !ok {
		t.Errorf("%v: not a read command", args)
		return -1, "", ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), rdTimeout)
	defer cancel()
	code := runRead(ctx, cmd, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustRead runs a command that must succeed.
func mustRead(t testing.TB, args ...string) string {
	t.Helper()
	code, out, errOut := readCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

// failRead runs a command that must fail with code, saying want on stderr.
func failRead(t testing.TB, code int, want string, args ...string) {
	t.Helper()
	got, out, errOut := readCLI(t, args...)
	if got != code || !strings.Contains(errOut, want) {
		t.Fatalf("%v: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", args, got, code, want, out, errOut)
	}
}

// ndjson decodes every line of out into a T.
func ndjson[T any](t testing.TB, out string) []T {
	t.Helper()
	var all []T
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		all = append(all, v)
	}
	return all
}

func with(base []string, args ...string) []string {
	return append(append(append([]string{}, args[:1]...), base...), args[1:]...)
}

// checkOrder checks a message read back against what was published and acked.
func checkOrder(t testing.TB, got api.Message, ack wire.Ack, sent *nats.Msg) {
	t.Helper()
	if got.Topic != ack.Topic || got.QueueID != ack.QueueID || got.QueueOffset != ack.QueueOffset ||
		got.MsgID != ack.MsgID || got.StoreTimestamp != ack.StoreTimestamp || got.CommitLogOffset != ack.CommitLogOffset {
		t.Fatalf("message %+v, ack %+v", got, ack)
	}
	if !bytes.Equal(got.Body, sent.Data) || got.BodySize != len(sent.Data) || got.Partial {
		t.Fatalf("%s: body %q (%d, partial %v), sent %q", got.MsgID, got.Body, got.BodySize, got.Partial, sent.Data)
	}
	want := map[string]string{
		ingress.PropNatsSubject: sent.Subject,
		commitlog.PropUniqKey:   sent.Header.Get(nats.MsgIdHdr),
		commitlog.PropKeys:      sent.Header.Get(ingress.DefaultKeysHeader),
		commitlog.PropTags:      sent.Header.Get(ingress.DefaultTagsHeader),
		"X-Note":                sent.Header.Get("X-Note"),
	}
	for k, v := range want {
		if got.Properties[k] != v {
			t.Fatalf("%s: property %s = %q, want %q (all: %v)", got.MsgID, k, got.Properties[k], v, got.Properties)
		}
	}
	if got.Tags != want[commitlog.PropTags] || got.Keys != want[commitlog.PropKeys] || got.UniqKey != want[commitlog.PropUniqKey] {
		t.Fatalf("%s: tags %q keys %q uniq %q", got.MsgID, got.Tags, got.Keys, got.UniqKey)
	}
}

// checkReadBack runs every read command on src (offline or online arguments) and checks the
// round trip.
func checkReadBack(t *testing.T, f *rdFixture, src []string) {
	topic := f.acks[0].Topic
	if topic != "orders_eu" {
		t.Fatalf("topic %q", topic)
	}

	// topics
	topics := ndjson[topicLine](t, mustRead(t, with(src, "topics", "--json")...))
	if !slices.ContainsFunc(topics, func(l topicLine) bool { return l.Topic == topic && slices.Equal(l.Queues, []int32{0, 1}) }) ||
		!slices.ContainsFunc(topics, func(l topicLine) bool { return l.Topic == "big_one" }) {
		t.Fatalf("topics: %+v", topics)
	}
	if out := mustRead(t, with(src, "topics")...); !strings.Contains(out, "TOPIC") || !strings.Contains(out, "orders_eu  0, 1") {
		t.Fatalf("topics table:\n%s", out)
	}

	// offsets
	bounds := ndjson[queueBounds](t, mustRead(t, with(src, "offsets", "--topic", topic, "--json")...))
	if len(bounds) != 2 {
		t.Fatalf("offsets: %+v", bounds)
	}
	for _, b := range bounds {
		in := f.ordersIn(b.QueueID)
		if b.Topic != topic || b.MinOffset != 0 || b.MaxOffset != int64(len(in)) ||
			b.MinStoreTime != f.acks[in[0]].StoreTimestamp || b.MaxStoreTime != f.acks[in[len(in)-1]].StoreTimestamp {
			t.Fatalf("offsets %+v; queue %d has %d orders", b, b.QueueID, len(in))
		}
	}
	if out := mustRead(t, with(src, "offsets", "--topic", topic)...); !strings.Contains(out, "QUEUE") ||
		!strings.Contains(out, time.UnixMilli(f.acks[f.ordersIn(0)[0]].StoreTimestamp).Format(tableTime)) {
		t.Fatalf("offsets table:\n%s", out)
	}

	// offsets for a time: the first offset stored at or after the time of order 9.
	ts := f.acks[9].StoreTimestamp
	forTime := ndjson[queueTimeOffset](t, mustRead(t, with(src, "offsets", "--topic", topic, "--queue-id", "0,1",
		"--time", fmt.Sprint(ts), "--json")...))
	for _, q := range forTime {
		want := int64(len(f.ordersIn(q.QueueID)))
		for _, i := range f.ordersIn(q.QueueID) {
			if f.acks[i].StoreTimestamp >= ts {
				want = f.acks[i].QueueOffset
				break
			}
		}
		if q.Offset != want || q.Timestamp != ts {
			t.Fatalf("offset for %d: %+v, want %d", ts, q, want)
		}
	}
	if len(forTime) != 2 {
		t.Fatalf("offsets --time: %+v", forTime)
	}
	if out := mustRead(t, with(src, "offsets", "--topic", topic, "-q", "1", "--time", "now")...); !strings.Contains(out, "OFFSET") {
		t.Fatalf("offsets --time table:\n%s", out)
	}

	// get: every message of each queue, in requests of 3 (--count spans several).
	for q := range int32(2) {
		in := f.ordersIn(q)
		msgs := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", topic, "--queue", fmt.Sprint(q), "--json")...))
		if len(msgs) != len(in) {
			t.Fatalf("get queue %d: %d messages, want %d", q, len(msgs), len(in))
		}
		for k, m := range msgs {
			checkOrder(t, m, f.acks[in[k]], f.msgs[in[k]])
		}
		page := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", topic, "--queue-id", fmt.Sprint(q),
			"--offset", "1", "--count", "3", "--json")...))
		if len(page) != 3 || page[0].QueueOffset != 1 || page[2].QueueOffset != 3 {
			t.Fatalf("get --offset 1 --count 3: %+v", page)
		}
		tagged := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", topic, "-q", fmt.Sprint(q), "--tags", "b", "--json")...))
		want := 0
		for _, i := range in {
			if i%2 == 1 {
				want++
			}
		}
		for _, m := range tagged {
			if m.Tags != "b" {
				t.Fatalf("get --tags b: %+v", m)
			}
		}
		if len(tagged) != want {
			t.Fatalf("get --tags b queue %d: %d messages, want %d", q, len(tagged), want)
		}
	}
	in0 := f.ordersIn(0)
	table := mustRead(t, with(src, "get", "--topic", topic, "--queue", "0", "--count", "2")...)
	for _, s := range []string{"MSGID", f.acks[in0[0]].MsgID, f.acks[in0[1]].MsgID, "NATS_SUBJECT=orders.eu", "X-Note=note",
		fmt.Sprintf("status FOUND, next offset 2 (queue %s/0 holds offsets 0 to %d)", topic, len(in0)-1),
		time.UnixMilli(f.acks[in0[0]].StoreTimestamp).Format(tableTime)} {
		if !strings.Contains(table, s) {
			t.Fatalf("get table: no %q in\n%s", s, table)
		}
	}
	if strings.Contains(table, f.acks[in0[2]].MsgID) {
		t.Fatalf("get --count 2 printed a third message:\n%s", table)
	}
	head := mustRead(t, with(src, "get", "--topic", topic, "--queue", "0", "--offset", fmt.Sprint(len(in0)))...)
	if !strings.Contains(head, "no messages") || !strings.Contains(head, "status OFFSET_OVERFLOW_ONE") {
		t.Fatalf("get at the head:\n%s", head)
	}

	// The large message: whole, online too (read in ranges there).
	bigMsgs := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", "big_one", "--queue", fmt.Sprint(f.big.QueueID), "--json")...))
	if len(bigMsgs) != 1 || len(bigMsgs[0].Body) != rdBigBody || bigMsgs[0].MsgID != f.big.MsgID || bigMsgs[0].Partial {
		t.Fatalf("get big: %d messages", len(bigMsgs))
	}
	bigMsg := ndjson[api.Message](t, mustRead(t, with(src, "msg", f.big.MsgID, "--json")...))
	if len(bigMsg) != 1 || !bytes.Equal(bigMsg[0].Body, bigMsgs[0].Body) {
		t.Fatalf("msg big: %d messages", len(bigMsg))
	}

	// msg
	for _, i := range []int{0, 7, 19} {
		got := ndjson[api.Message](t, mustRead(t, with(src, "msg", f.acks[i].MsgID, "--json")...))
		if len(got) != 1 {
			t.Fatalf("msg: %d lines", len(got))
		}
		checkOrder(t, got[0], f.acks[i], f.msgs[i])
	}
	detail := mustRead(t, with(src, "msg", f.acks[3].MsgID)...)
	for _, s := range []string{"msg id:", f.acks[3].MsgID, "UNIQ_KEY=id-003", "__CRC32#=", string(f.msgs[3].Data)} {
		if !strings.Contains(detail, s) {
			t.Fatalf("msg: no %q in\n%s", s, detail)
		}
	}
	if detail := mustRead(t, with(src, "msg", f.acks[7].MsgID)...); !strings.Contains(detail, "body (5 bytes, binary, base64):\nAAEC//4=") {
		t.Fatalf("msg of a binary body:\n%s", detail)
	}

	// query: by a key, by the unique key, and by a shared key in time ranges.
	one := ndjson[api.Message](t, mustRead(t, with(src, "query", "--topic", topic, "--key", "order-005", "--json")...))
	if len(one) != 1 {
		t.Fatalf("query order-005: %+v", one)
	}
	checkOrder(t, one[0], f.acks[5], f.msgs[5])
	if uniq := ndjson[api.Message](t, mustRead(t, with(src, "query", "--topic", topic, "--key", "id-012", "--json")...)); len(uniq) != 1 || uniq[0].MsgID != f.acks[12].MsgID {
		t.Fatalf("query id-012: %+v", uniq)
	}
	first, last := f.acks[0].StoreTimestamp, f.acks[rdOrders-1].StoreTimestamp
	rfc := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, rdOrders},
		{[]string{"--begin=-1h"}, rdOrders},
		{[]string{"--begin", rfc(first - 2000), "--end", rfc(last + 2000)}, rdOrders},
		{[]string{"--end", fmt.Sprint(first - 2000)}, 0},
		{[]string{"--begin", fmt.Sprint(last + 2000)}, 0},
		{[]string{"--max", "5"}, 5},
	} {
		args := append(with(src, "query", "--topic", topic, "--key", "common", "--json"), c.args...)
		got := ndjson[api.Message](t, mustRead(t, args...))
		if len(got) != c.want {
			t.Fatalf("query common %v: %d messages, want %d", c.args, len(got), c.want)
		}
		for k := 1; k < len(got); k++ {
			if got[k].CommitLogOffset >= got[k-1].CommitLogOffset {
				t.Fatalf("query common %v: not newest first", c.args)
			}
		}
	}
	qt := mustRead(t, with(src, "query", "--topic", topic, "--key", "order-008")...)
	if !strings.Contains(qt, f.acks[8].MsgID) || !strings.Contains(qt, "order 008") {
		t.Fatalf("query table:\n%s", qt)
	}
	if none := mustRead(t, with(src, "query", "--topic", topic, "--key", "nothing")...); !strings.Contains(none, "no message of topic orders_eu has the key") {
		t.Fatalf("query without a match:\n%s", none)
	}

	// Errors: runtime errors exit 1 and say what is wrong.
	failRead(t, 1, `topic "nope" has no queues in this store`, with(src, "get", "--topic", "nope", "--queue", "0")...)
	failRead(t, 1, `did you mean "orders_eu"`, with(src, "get", "--topic", "orders.eu", "--queue", "0")...)
	failRead(t, 1, `topic "orders_eu" has no queue 9 in this store`, with(src, "get", "--topic", topic, "--queue", "9")...)
	failRead(t, 1, "its queues: 0, 1", with(src, "offsets", "--topic", topic, "--queue", "9")...)
	failRead(t, 1, fmt.Sprintf("offset 999 is out of range: queue orders_eu/0 holds offsets 0 to %d", len(in0)-1),
		with(src, "get", "--topic", topic, "--queue", "0", "--offset", "999")...)
	failRead(t, 1, `topic "nope" has no queues`, with(src, "offsets", "--topic", "nope")...)
	failRead(t, 1, `topic "nope" has no queues`, with(src, "query", "--topic", "nope", "--key", "k")...)
	absent := string(commitlog.AppendOffsetMsgID(nil, netip.MustParseAddrPort("127.0.0.1:10911"), 900_000))
	failRead(t, 1, "message "+absent+" not found in this store", with(src, "msg", absent)...)
	// Usage errors exit 2.
	failRead(t, 2, "malformed message id", with(src, "msg", "not-an-id")...)
	failRead(t, 2, "bad time", with(src, "query", "--topic", topic, "--key", "k", "--begin", "yesterday")...)
	failRead(t, 2, "--count must be at least 1", with(src, "get", "--topic", topic, "--queue", "0", "--count", "0")...)
}

func TestReadCommands(t *testing.T) {
	f := startReadEngine(t)
	t.Run("offline-while-running", func(t *testing.T) { checkReadBack(t, f, f.storeArgs()) })
	t.Run("online", func(t *testing.T) { checkReadBack(t, f, f.natsArgs()) })
	f.stop(t)
	t.Run("offline-stopped", func(t *testing.T) { checkReadBack(t, f, f.storeArgs()) })
}

func TestReadCommandSourceErrors(t *testing.T) {
	t.Setenv("NATS_URL", "")
	dir := t.TempDir()
	failRead(t, 2, "no source: give --store DIR", "get", "--topic", "t", "--queue", "0")
	failRead(t, 2, "--store and --nats can't be used together", "topics", "--store", dir, "--nats", "nats://127.0.0.1:4222")
	failRead(t, 2, "no store at "+dir+" (it has no commitlog directory)", "topics", "--store", dir)
	failRead(t, 2, "no store at", "topics", "--store", dir+"/missing")
	failRead(t, 2, "missing flags: --topic", "get", "--store", dir, "--queue", "0")

	// A NATS server without an engine: nobody answers the API.
	ns := natstest.RunRandClientPortServer()
	t.Cleanup(ns.Shutdown)
	failRead(t, 1, "no engine answers at "+ns.ClientURL()+" (is it running with the read API on?)", "topics", "--nats", ns.ClientURL())
	failRead(t, 1, `with --api-prefix "X.API"`, "get", "-s", ns.ClientURL(), "--api-prefix", "X.API", "--topic", "t", "--queue", "0")
	// $NATS_URL stands in for --nats, and does not conflict with --store.
	t.Setenv("NATS_URL", ns.ClientURL())
	failRead(t, 1, "no engine answers at", "topics")
	failRead(t, 2, "no store at", "topics", "--store", dir)
	ns.Shutdown()
	failRead(t, 1, "cannot connect to NATS at", "topics", "--nats", ns.ClientURL())
}

// TestReadGetWait: a get at the head of a queue waits for the next message, online (a long
// poll) and offline (the store looked at again). Offline, the message is published once the
// get waits; online, the get may also find it at once.
func TestReadGetWait(t *testing.T) {
	f := startReadEngine(t)
	waiting := make(chan struct{}, 1)
	offlineWaiting = func() { waiting <- struct{}{} }
	t.Cleanup(func() { offlineWaiting = nil })
	for _, src := range [][]string{f.natsArgs(), f.storeArgs()} {
		offline := src[0] == "--store"
		ack := f.publish(t, waitMsg(0))
		type result struct {
			code          int
			stdout, stder string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errOut := readCLI(t, with(src, "get", "--topic", ack.Topic, "--queue", fmt.Sprint(ack.QueueID),
				"--offset", fmt.Sprint(ack.QueueOffset+1), "--wait", "50s", "--json")...)
			done <- result{code, out, errOut}
		}()
		if offline {
			select {
			case <-waiting:
			case r := <-done:
				t.Fatalf("offline get --wait returned without waiting: exit %d\n%s%s", r.code, r.stdout, r.stder)
			}
		}
		next := f.publish(t, waitMsg(1))
		var r result
		select {
		case r = <-done:
		case <-time.After(rdTimeout):
			t.Fatalf("%v: get --wait did not return", src)
		}
		msgs := ndjson[api.Message](t, r.stdout)
		if r.code != 0 || len(msgs) != 1 || msgs[0].MsgID != next.MsgID || next.QueueID != ack.QueueID {
			t.Fatalf("%v: get --wait: exit %d, %+v\n%s", src, r.code, msgs, r.stder)
		}
	}
}

// waitMsg is a message of the topic waitfor, always in the same queue (one key).
func waitMsg(i int) *nats.Msg {
	m := nats.NewMsg("waitfor")
	m.Data = fmt.Appendf(nil, "wait %d", i)
	m.Header.Set(ingress.DefaultKeysHeader, "same-queue")
	return m
}

// TestReadExitCodes runs the real binary: the exit codes are what scripts see, kong's usage
// errors included.
func TestReadExitCodes(t *testing.T) {
	f := startReadEngine(t)
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0", "NATS_URL=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{with(f.storeArgs(), "topics", "--json"), 0, `{"topic":"big_one","queues":[`},
		{with(f.natsArgs(), "msg", f.acks[2].MsgID, "--json"), 0, `"msgId":"` + f.acks[2].MsgID + `"`},
		{with(f.storeArgs(), "get", "--topic", "nope", "--queue", "0"), 1, `topic "nope" has no queues in this store`},
		{with(f.natsArgs(), "get", "--topic", "orders_eu", "--queue", "0", "--offset", "500"), 1, "out of range"},
		{[]string{"get", "--topic", "t", "--queue", "0"}, 2, "no source"},
		{with(f.storeArgs(), "get", "--queue", "0"), 2, "missing flags: --topic"},
		{with(f.storeArgs(), "msg", "xyz"), 2, "malformed message id"},
		{with(f.storeArgs(), "get", "--topic", "t", "--queue", "0", "--bogus"), 2, "unknown flag --bogus"},
		{with(f.storeArgs(), "topics", "--commit-log-size", "1GiB"), 2, "CommitLog segments of " + f.dir + " are 1048576 bytes, not 1073741824"},
	} {
		code, out, errOut := run(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Fatalf("%v: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
}
