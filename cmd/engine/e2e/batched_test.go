package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

// docs/BATCHED-ACKS.md "Protocol" and "Restart: the guarantee", with the raw client of
// batchclient_test.go against the binary.

// readAt reads the message at a stored position through the read API.
func readAt(t *testing.T, nc *nats.Conn, p position) map[string]any {
	t.Helper()
	waitReadable(t, nc, ack{Topic: p.topic, QueueID: p.queue, QueueOffset: p.offset})
	got := apiGet(t, nc, p.topic, p.queue, p.offset, 0)
	if len(got) == 0 || got[0]["queueOffset"] != float64(p.offset) {
		t.Fatalf("%+v: %v", p, got)
	}
	return got[0]
}

// TestBatchedProtocol: a stream's messages are acked in rounds with their positions; the id is
// <stream>:<seq> (or the message's Nats-Msg-Id) and the Rs-Seq header is not stored; a hole is
// reported missing and filled by a resend; a resend of a stored sequence is answered as a
// duplicate at the first copy's position and not stored again; a refusal carries its code and
// stops `through` until the floor passes it; a pack is split into its entries, each with its own
// headers.
func TestBatchedProtocol(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--max-body", "1024")
	nc := connect(t, e.url)
	s := newRawStream(t, nc, "e2e-S1")
	key := []string{"Rmq-Keys", "one-key"} // one queue: positions follow the sequences

	for seq := uint64(1); seq <= 5; seq++ {
		s.send("bat.a", seq, fmt.Sprint("body ", seq), false, false, key...)
	}
	s.until("1..5 acked", func() bool { return s.through >= 5 && s.answered(1, 5) })
	for seq := uint64(1); seq <= 5; seq++ {
		p := s.stored[seq]
		if p.topic != "bat_a" || p.offset != int64(seq-1) || p.dup {
			t.Fatalf("seq %d at %+v, want bat_a offset %d", seq, p, seq-1)
		}
		m := readAt(t, nc, p)
		props, _ := m["properties"].(map[string]any)
		if props["UNIQ_KEY"] != fmt.Sprintf("e2e-S1:%d", seq) || m["body"] != b64(fmt.Sprint("body ", seq)) {
			t.Fatalf("seq %d stored as %v", seq, m)
		}
		for k := range props {
			if strings.EqualFold(k, "Rs-Seq") {
				t.Fatalf("the Rs-Seq header was stored: %v", props)
			}
		}
	}
	s.floor = 5

	// A hole: 8 never sent. It is reported missing; its resend fills it.
	for _, seq := range []uint64{6, 7, 9} {
		s.send("bat.a", seq, fmt.Sprint("body ", seq), false, false, key...)
	}
	s.until("8 reported missing", func() bool { return s.missing[8] && s.answered(6, 7) && s.answered(9, 9) })
	if s.through >= 8 {
		t.Fatalf("through %d covers the missing 8", s.through)
	}
	s.send("bat.a", 8, "body 8", true, false, key...)
	s.until("8 resent and acked", func() bool { return s.through >= 9 && s.answered(8, 8) })
	s.floor = 9

	// A resend of a stored sequence: a duplicate, at the first copy's position.
	first := s.stored[3]
	s.send("bat.a", 3, "body 3", true, false, key...)
	s.until("3 answered as a duplicate", func() bool { return s.stored[3].dup })
	if got := s.stored[3]; got.offset != first.offset || got.queue != first.queue {
		t.Fatalf("the duplicate of 3 answered at %+v, the first copy is at %+v", got, first)
	}

	// A refusal: 413 for a body over --max-body; through stops below it until the floor passes.
	s.send("bat.a", 10, strings.Repeat("x", 2000), false, false, key...)
	s.until("10 refused", func() bool { _, ok := s.refused[10]; return ok })
	if s.refused[10] != 413 || s.through >= 10 {
		t.Fatalf("10: refused %d, through %d; want 413 and through below 10", s.refused[10], s.through)
	}
	s.floor = 10
	s.send("bat.a", 11, "body 11", false, false, key...)
	s.until("through passes the refusal", func() bool { return s.through >= 11 })

	// A message's own Nats-Msg-Id is its id.
	s.send("bat.a", 12, "body 12", false, false, append(key, "Nats-Msg-Id", "user-12")...)
	s.until("12 acked", func() bool { return s.through >= 12 })
	if props, _ := readAt(t, nc, s.stored[12])["properties"].(map[string]any); props["UNIQ_KEY"] != "user-12" {
		t.Fatalf("12 with a Nats-Msg-Id stored with %v", props)
	}
	s.floor = 12

	// A pack of three: entry 14 with headers of its own.
	s.sendPack("bat.a", 13, []packEntry{
		{key, "pack 13"},
		{append([]string{"Nats-Msg-Id", "pack-14", "X-Note", "fourteen"}, key...), "pack 14"},
		{key, "pack 15"},
	})
	s.until("the pack acked", func() bool { return s.through >= 15 && s.answered(13, 15) })
	for seq, want := range map[uint64]string{13: "pack 13", 14: "pack 14", 15: "pack 15"} {
		m := readAt(t, nc, s.stored[seq])
		props, _ := m["properties"].(map[string]any)
		if m["body"] != b64(want) || props["NATS_SUBJECT"] != "bat.a" {
			t.Fatalf("pack entry %d stored as %v", seq, m)
		}
		if seq == 14 && (props["UNIQ_KEY"] != "pack-14" || props["X-Note"] != "fourteen") {
			t.Fatalf("pack entry 14's own headers: %v", props)
		}
		if seq == 13 && props["UNIQ_KEY"] != "e2e-S1:13" {
			t.Fatalf("pack entry 13's id: %v", props)
		}
	}
	if len(s.plain) != 0 {
		t.Fatalf("plain error replies on the ack subject: %v", s.plain)
	}

	// Stored once each: 15 sequences, 14 stored (10 refused), none twice.
	e.stop()
	if got := readQueue(t, offline(dir), "bat_a", s.stored[1].queue); len(got) != 14 {
		t.Fatalf("bat_a holds %d messages, want 14", len(got))
	}
}

// TestBatchedRefusals: a malformed header, or a pack that cannot be split, gets a plain 400
// reply on the ack subject (no stream) and nothing is stored; an engine with batched acks off,
// or with a queue group, refuses the header; a message with the header and no reply subject is
// stored, fire-and-forget.
func TestBatchedRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	nc := connect(t, e.url)
	plain := func(s *rawStream, what string) wireError {
		t.Helper()
		n := len(s.plain)
		s.until(what+": a plain error reply", func() bool { return len(s.plain) > n })
		if got := s.plain[n]; got.Code != 400 {
			t.Fatalf("%s: %+v, want 400", what, got)
		}
		return s.plain[n]
	}
	bad := newRawStream(t, nc, "e2e-bad")
	m := msg("ref.a", "x", "Rs-Seq", "e2e-bad not-a-number 0")
	m.Reply = bad.inbox
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	plain(bad, "a malformed Rs-Seq")
	m = msg("ref.a", "x", "Rs-Seq", "e2e-bad 5 5") // acked must be below seq
	m.Reply = bad.inbox
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	plain(bad, "acked not below seq")

	pk := newRawStream(t, nc, "e2e-pack")
	body := encodePack([]packEntry{{nil, "one"}, {nil, "two"}})
	pk.sendPackRaw("ref.a", 1, 3, body) // a count the body does not hold
	plain(pk, "a pack of 3 with 2 entries")
	pk.sendPackRaw("ref.a", 1, 2, append(body, 0xff)) // bytes after the last entry
	plain(pk, "a pack with bytes after its entries")
	pk.sendPack("ref.a", 1, []packEntry{{[]string{"Rs-Seq", "x 1 0"}, "one"}}) // a protocol header in an entry
	plain(pk, "a pack entry with Rs-Seq")

	// Fire-and-forget with the header: stored, found by its id.
	ff := newRawStream(t, nc, "e2e-ff")
	ff.send("ref.ff", 1, "fire and forget", false, true, "Rmq-Keys", "ff")
	after := stored(t, nc, msg("ref.ff", "after", "Rmq-Keys", "ff"))
	waitReadable(t, nc, after)
	got := apiGet(t, nc, after.Topic, after.QueueID, 0, 0)
	if len(got) != 2 || got[0]["uniqKey"] != "e2e-ff:1" {
		t.Fatalf("the fire-and-forget batched message: %v", got)
	}
	e.stop()
	// Nothing of the refused ones is stored: ref_a has no queue.
	if r := runCLI(t, append([]string{"offsets", "--topic", "ref_a"}, offline(dir)...)...); r.code != 1 {
		t.Fatalf("ref_a after refusals only: exit %d, %s", r.code, r.stdout)
	}

	for _, args := range [][]string{{"--no-batched-acks"}, {"--queue-group", "g"}} {
		off := startEngine(t, t.TempDir(), args...)
		s := newRawStream(t, connect(t, off.url), "e2e-off")
		s.send("ref.off", 1, "x", false, false)
		if got := plain(s, fmt.Sprint(args)); !strings.Contains(got.Description, "batched acks (Rs-Seq) are off in this engine") {
			t.Errorf("%v: %+v", args, got)
		}
		off.stop()
	}
}

// TestBatchedAfterSIGKILL: "Restart: the guarantee": after a SIGKILL, a resend of a sequence
// that was acked before is found in the store and answered as a duplicate with its position,
// not stored again; the stream goes on on the new engine.
func TestBatchedAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	s := newRawStream(t, connect(t, e.url), "e2e-restart")
	key := []string{"Rmq-Keys", "k"}
	for seq := uint64(1); seq <= 10; seq++ {
		s.send("rst.a", seq, fmt.Sprint("body ", seq), false, false, key...)
	}
	s.until("1..10 acked", func() bool { return s.through >= 10 && s.answered(1, 10) })
	before := map[uint64]position{}
	for q, p := range s.stored {
		before[q] = p
	}
	e.kill()
	e = e.restart(t)

	// A new connection (the old server is gone): the same stream, resending 1..10, then 11.
	s2 := newRawStream(t, connect(t, e.url), "e2e-restart")
	for seq := uint64(1); seq <= 10; seq++ {
		s2.send("rst.a", seq, fmt.Sprint("body ", seq), true, false, key...)
	}
	s2.until("the resends answered", func() bool { return s2.answered(1, 10) })
	for seq := uint64(1); seq <= 10; seq++ {
		got, want := s2.stored[seq], before[seq]
		if !got.dup || got.offset != want.offset || got.queue != want.queue {
			t.Fatalf("resend of %d after the restart answered %+v, first stored at %+v: want a duplicate there", seq, got, want)
		}
	}
	s2.floor = 10
	s2.send("rst.a", 11, "body 11", false, false, key...)
	s2.until("11 acked", func() bool { return s2.through >= 11 })
	if p := s2.stored[11]; p.offset != 10 {
		t.Fatalf("11 at %+v, want offset 10 (the queue goes on)", p)
	}
	e.stop()
	if got := readQueue(t, offline(dir), "rst_a", before[1].queue); len(got) != 11 {
		t.Fatalf("rst_a holds %d messages, want 11 (each once)", len(got))
	}
}

// TestBatchedAnswersAtSIGTERM: README: 503 answers "the engine is stopping"; issue 16 reports
// that a SIGTERM under batched load answered nothing to the messages in flight. A publisher
// keeps sending packs while the engine stops; every message is then answered by the engine
// (stored or refused) or, once nothing subscribes, by the server's no-responders status:
// answers and statuses together are one per message. The engine uses an external server, so
// that the publisher stays connected while it stops (with the embedded one, what the server
// had not sent when it stopped with the engine cannot be told apart from what was never
// answered).
func TestBatchedAnswersAtSIGTERM(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0)
	dir := t.TempDir()
	e := startEngine(t, dir, "--server", clientURL(ns))
	nc := connect(t, clientURL(ns))
	const bound = 200_000
	s := newRawStreamBuffer(t, nc, "e2e-term", bound+1000) // room for every answer: none is dropped here
	stop := make(chan struct{})
	sent := make(chan uint64, 1)
	go func() {
		seq := uint64(0)
		defer func() { sent <- seq }()
		for seq < bound { // stop comes long before
			select {
			case <-stop:
				return
			default:
			}
			// Packs of 32, as the Go publisher sends under load.
			entries := make([]packEntry, 32)
			for i := range entries {
				entries[i] = packEntry{nil, fmt.Sprint(seq + uint64(i) + 1)}
			}
			m := nats.NewMsg("term.a")
			m.Data = encodePack(entries)
			m.Header.Set("Rs-Seq", fmt.Sprintf("e2e-term %d 0", seq+1))
			m.Header.Set("Rs-Pack", "32")
			m.Reply = s.inbox
			if nc.PublishMsg(m) != nil {
				return
			}
			seq += 32
		}
	}()
	statuses := 0
	read := func(m *nats.Msg) {
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" { // no responders, for a pack
			statuses += 32
			return
		}
		s.apply(m)
	}
	// Under load: the engine has answered a few thousand when the signal comes.
	for s.through < 2000 {
		select {
		case m := <-s.acks:
			read(m)
		case <-e.exited:
			t.Fatal("engine exited")
		}
	}
	e.send(syscall.SIGTERM)
	if code := e.wait(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	close(stop)
	n := <-sent
	if err := nc.Flush(); err != nil { // every answer and status sent to us has arrived
		t.Fatal(err)
	}
	for len(s.acks) > 0 {
		read(<-s.acks)
	}
	answered := 0
	for seq := uint64(1); seq <= n; seq++ {
		if s.answered(seq, seq) {
			answered++
		}
	}
	if answered+statuses != int(n) {
		t.Fatalf("%d messages sent: %d answered by the engine, %d no-responders statuses: %d got nothing",
			n, answered, statuses, int(n)-answered-statuses)
	}
}
