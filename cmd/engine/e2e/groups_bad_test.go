package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// docs/GROUPS.md, "Errors": bad input gets a clear error, to whoever sent it, and changes
// nothing else.

// rawCall sends a JSON request (or raw bytes) and returns the reply's error, nil for a reply
// without one; out, when given, takes the reply.
func rawCall(t *testing.T, nc *nats.Conn, subject string, req any, out any) *wireError {
	t.Helper()
	data, ok := req.([]byte)
	if !ok {
		data, _ = json.Marshal(req)
	}
	reply, err := nc.Request(subject, data, waitTimeout)
	if err != nil {
		t.Fatalf("%s %s: %v", subject, data, err)
	}
	var e struct {
		Error *wireError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &e); err != nil {
		t.Fatalf("%s %s: reply %q: %v", subject, data, reply.Data, err)
	}
	if e.Error == nil && out != nil {
		if err := json.Unmarshal(reply.Data, out); err != nil {
			t.Fatal(err)
		}
	}
	return e.Error
}

// wantCode fails unless e is an error with code whose description contains every word.
func wantCode(t *testing.T, what string, e *wireError, code int, words ...string) {
	t.Helper()
	if e == nil || e.Code != code {
		t.Fatalf("%s: %+v, want a %d", what, e, code)
	}
	for _, w := range words {
		if !strings.Contains(e.Description, w) {
			t.Fatalf("%s: %q does not say %q", what, e.Description, w)
		}
	}
}

// rawRead sends a batched read and returns its sections, or its error code.
func rawRead(t *testing.T, nc *nats.Conn, subject string, req map[string]any, asked int) ([]docSection, int) {
	t.Helper()
	data, _ := json.Marshal(req)
	reply, err := nc.Request(subject, data, waitTimeout)
	if err != nil {
		t.Fatalf("%s %s: %v", subject, data, err)
	}
	secs, err := decodeReadReply(reply, asked)
	if code := docCode(err); code != 0 {
		if reply.Header.Get("Rs-Error") == "" || reply.Header.Get("Nats-Service-Error-Code") != fmt.Sprint(code) {
			t.Fatalf("%s %s: error %d without its description or micro's headers: %v", subject, data, code, reply.Header)
		}
		return nil, code
	} else if err != nil {
		t.Fatalf("%s %s: %v", subject, data, err)
	}
	return secs, 0
}

// groupNames are the groups `engine groups list --json` shows.
func groupNames(t *testing.T, url string) []string {
	t.Helper()
	var out []string
	for _, g := range ndjson(t, mustCLI(t, "groups", "list", "--json", "--nats", url)) {
		out = append(out, fmt.Sprint(g["key"]))
	}
	return out
}

// TestGroupBadRequests: an unknown topic (404), malformed requests (400), a stale epoch (409),
// a commit from outside a group that has members (409), a reset or delete of a group that has
// members (409): each is refused with a code and a description that says why, to the client
// that sent it, and no group, member or offset changes.
func TestGroupBadRequests(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	for i := range 8 {
		stored(t, nc, msg("orders", fmt.Sprint("m", i)))
	}
	join := "$RS.API.group.join"

	// An unknown topic: 404, from the API and from engine consume.
	wantCode(t, "join of an unknown topic", rawCall(t, nc, join, map[string]any{"group": "g", "topic": "nope"}, nil), 404, "nope")
	r := runCLI(t, "consume", "--nats", e.url, "--group", "g", "--topic", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "nope") || !strings.Contains(r.stderr, "engine topics") {
		t.Fatalf("engine consume --topic nope: exit %d, %q", r.code, r.stderr)
	}

	// Malformed requests: 400, each saying what is wrong.
	for _, c := range []struct {
		what    string
		subject string
		req     any
		words   []string
	}{
		{"not JSON", join, []byte("{group:"), nil},
		{"no group", join, map[string]any{"topic": "orders"}, []string{"group"}},
		{"a group with @", join, map[string]any{"group": "a@b", "topic": "orders"}, []string{"@"}},
		{"a group of 256 bytes", join, map[string]any{"group": strings.Repeat("g", 256), "topic": "orders"}, []string{"255"}},
		{"an unknown field", join, map[string]any{"group": "g", "topic": "orders", "grup": "x"}, []string{"grup"}},
		{"a start that is neither", join, map[string]any{"group": "g", "topic": "orders", "start": "middle"}, []string{"middle"}},
		{"a notify with a wildcard", join, map[string]any{"group": "g", "topic": "orders", "notify": "a.*"}, []string{"notify"}},
		{"a notify under the API", join, map[string]any{"group": "g", "topic": "orders", "notify": "$RS.API.x"}, []string{"notify"}},
		{"a subject filter that is no subject", join, map[string]any{"group": "g", "topic": "orders", "subject": "a..b"}, []string{"a..b"}},
		{"a client id of 257 bytes", join, map[string]any{"group": "g", "topic": "orders", "clientId": strings.Repeat("c", 257)}, []string{"256"}},
		{"a group list's negative max", "$RS.API.group.list", map[string]any{"max": -1}, []string{"max"}},
		{"a reset with offset and timestamp", "$RS.API.group.reset", map[string]any{"group": "g", "topic": "orders", "offset": 0, "timestamp": 1}, []string{"either"}},
		{"a reset with neither", "$RS.API.group.reset", map[string]any{"group": "g", "topic": "orders"}, []string{"either"}},
	} {
		wantCode(t, c.what, rawCall(t, nc, c.subject, c.req, nil), 400, c.words...)
	}
	if got := groupNames(t, e.url); len(got) != 0 {
		t.Fatalf("groups after refused joins: %v", got)
	}

	// A member: A holds every queue, commits, then B joins and A gives two back.
	var a docAssignment
	if err := rawCall(t, nc, join, map[string]any{"group": "fence", "topic": "orders", "memberId": "", "clientId": "A"}, &a); err != nil {
		t.Fatal(err)
	}
	api := a.API
	for _, q := range a.Queues {
		if err := rawCall(t, nc, api+".commit", map[string]any{"group": "fence", "topic": "orders", "queueId": q.QueueID,
			"offset": 1, "memberId": a.MemberID, "epoch": q.Epoch}, nil); err != nil {
			t.Fatal(err)
		}
	}
	member := func(id string) map[string]any {
		return map[string]any{"group": "fence", "topic": "orders", "memberId": id}
	}

	// Malformed member requests: 400.
	for _, c := range []struct {
		what, subject string
		req           map[string]any
	}{
		{"a heartbeat without memberId", api + ".group.heartbeat", map[string]any{"group": "fence", "topic": "orders"}},
		{"a release with a negative offset", api + ".group.release", map[string]any{"group": "fence", "topic": "orders", "memberId": a.MemberID,
			"queues": []map[string]any{{"queueId": 0, "epoch": a.Queues[0].Epoch, "offset": -1}}}},
	} {
		wantCode(t, c.what, rawCall(t, nc, c.subject, c.req, nil), 400)
	}
	for _, c := range []struct {
		what string
		req  map[string]any
	}{
		{"a read without queues", map[string]any{"topic": "orders", "group": "fence", "memberId": a.MemberID, "queues": []any{}}},
		{"a read with a negative offset", map[string]any{"topic": "orders", "group": "fence", "memberId": a.MemberID,
			"queues": []map[string]any{{"queueId": 0, "epoch": a.Queues[0].Epoch, "offset": -5}}}},
		{"a read with a queue twice", map[string]any{"topic": "orders", "group": "fence", "memberId": a.MemberID,
			"queues": []map[string]any{{"queueId": 0, "epoch": 1, "offset": 0}, {"queueId": 0, "epoch": 1, "offset": 0}}}},
		{"a member's read with a subject filter", map[string]any{"topic": "orders", "group": "fence", "memberId": a.MemberID, "subject": "x",
			"queues": []map[string]any{{"queueId": 0, "epoch": a.Queues[0].Epoch, "offset": 0}}}},
	} {
		if _, code := rawRead(t, nc, api+".read", c.req, 1); code != 400 {
			t.Fatalf("%s: code %d, want 400", c.what, code)
		}
	}
	// An unknown member: 404 (join again).
	wantCode(t, "a heartbeat of an unknown member", rawCall(t, nc, api+".group.heartbeat", member("nobody"), nil), 404, "join again")
	if _, code := rawRead(t, nc, api+".read", map[string]any{"topic": "orders", "group": "fence", "memberId": "nobody",
		"queues": []map[string]any{{"queueId": 0, "epoch": 1, "offset": 0}}}, 1); code != 404 {
		t.Fatalf("a read of an unknown member: %d, want 404", code)
	}

	var b docAssignment
	if err := rawCall(t, nc, join, map[string]any{"group": "fence", "topic": "orders", "clientId": "B"}, &b); err != nil {
		t.Fatal(err)
	}
	var again docAssignment
	if err := rawCall(t, nc, api+".group.heartbeat", member(a.MemberID), &again); err != nil {
		t.Fatal(err)
	}
	if len(again.Revoke) != 2 {
		t.Fatalf("A after B joined: %+v, want two queues asked back", again)
	}
	moved := again.Revoke[0]
	var rel docAssignment
	rq := []map[string]any{}
	for _, q := range again.Revoke {
		rq = append(rq, map[string]any{"queueId": q.QueueID, "epoch": q.Epoch, "offset": 3})
	}
	if err := rawCall(t, nc, api+".group.release", map[string]any{"group": "fence", "topic": "orders", "memberId": a.MemberID, "queues": rq}, &rel); err != nil {
		t.Fatal(err)
	}
	before := describe(t, e.url, "fence", "orders").committed()
	if before[moved.QueueID] != 3 {
		t.Fatalf("committed after the release: %v", before)
	}

	// A stale epoch: the queue A gave up, and a queue it holds named with another epoch.
	wantCode(t, "a commit at a stale epoch", rawCall(t, nc, api+".commit", map[string]any{"group": "fence", "topic": "orders",
		"queueId": moved.QueueID, "offset": 7, "memberId": a.MemberID, "epoch": moved.Epoch}, nil), 409, "epoch")
	kept := again.Queues[0]
	wantCode(t, "a commit at another epoch", rawCall(t, nc, api+".commit", map[string]any{"group": "fence", "topic": "orders",
		"queueId": kept.QueueID, "offset": 7, "memberId": a.MemberID, "epoch": kept.Epoch + 1000}, nil), 409, "epoch")
	secs, code := rawRead(t, nc, api+".read", map[string]any{"topic": "orders", "group": "fence", "memberId": a.MemberID,
		"queues": []map[string]any{{"queueId": moved.QueueID, "epoch": moved.Epoch, "offset": 3}}}, 1)
	if code != 0 || secs[0].status != docFenced || len(secs[0].records) != 0 {
		t.Fatalf("a read at a stale epoch: %+v (code %d), want FENCED without messages", secs, code)
	}
	// A commit from outside the membership, a reset, a delete: 409 while the group has members.
	wantCode(t, "a commit without membership", rawCall(t, nc, "$RS.API.commit", map[string]any{"group": "fence", "topic": "orders",
		"queueId": 0, "offset": 7}, nil), 409, "members")
	wantCode(t, "a reset with members", rawCall(t, nc, "$RS.API.group.reset", map[string]any{"group": "fence", "topic": "orders", "offset": 0}, nil), 409, "members")
	wantCode(t, "a delete with members", rawCall(t, nc, "$RS.API.group.delete", map[string]any{"group": "fence", "topic": "orders"}, nil), 409, "members")
	for _, args := range [][]string{{"reset", "fence", "--topic", "orders", "--offset", "0"}, {"delete", "fence", "--topic", "orders"}} {
		r := runCLI(t, append(append([]string{"groups"}, args...), "--nats", e.url)...)
		if r.code != 1 || !strings.Contains(r.stderr, "members") || !strings.Contains(r.stderr, "stop the group's members first") {
			t.Fatalf("engine groups %v with members: exit %d, %q", args, r.code, r.stderr)
		}
	}
	// A join with another subject filter than the group's: 409.
	wantCode(t, "a join with another filter", rawCall(t, nc, join, map[string]any{"group": "fence", "topic": "orders", "subject": "orders.x"}, nil), 409, "filter")

	after := describe(t, e.url, "fence", "orders")
	if got := after.committed(); fmt.Sprint(got) != fmt.Sprint(before) || len(after.Members) != 2 {
		t.Fatalf("after the refusals: committed %v (was %v), %d members", got, before, len(after.Members))
	}
	if got := groupNames(t, e.url); len(got) != 1 || got[0] != "orders@fence" {
		t.Fatalf("groups after the refusals: %v", got)
	}
}

// TestGroupStaleLongPoll: a read waiting at the end of a queue (a long poll) when its queue is
// asked back, released and given to another member does not hand the next message to the old
// holder: its section comes back FENCED, and the new holder reads the message. "No message to
// two live members at the same time" holds for a read already under way, not only for the next.
func TestGroupStaleLongPoll(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	stored(t, nc, msg("poll", "first", "Rmq-Keys", "k0"))
	// Whether the waiting read reached the engine before the join that moves its queue cannot
	// be seen from outside; when it did not, the moved queue is not in its wait (FENCED at
	// once), and the message does not wake it: that attempt is tried again.
	for attempt := range 5 {
		if staleLongPoll(t, e.url, nc, fmt.Sprint("p", attempt)) {
			return
		}
		t.Logf("attempt %d: the read reached the engine after the join; again", attempt)
	}
	t.Fatal("in 5 attempts the waiting read never reached the engine before the join")
}

func staleLongPoll(t *testing.T, url string, nc *nats.Conn, group string) bool {
	t.Helper()
	var a docAssignment
	if err := rawCall(t, nc, "$RS.API.group.join", map[string]any{"group": group, "topic": "poll", "clientId": "A"}, &a); err != nil {
		t.Fatal(err)
	}
	// The queues' ends, from a first read that does not wait.
	var qs []map[string]any
	for _, q := range a.Queues {
		qs = append(qs, map[string]any{"queueId": q.QueueID, "epoch": q.Epoch, "offset": 0})
	}
	first, code := rawRead(t, nc, a.API+".read", map[string]any{"topic": "poll", "group": group, "memberId": a.MemberID, "queues": qs}, len(qs))
	if code != 0 {
		t.Fatalf("A's first read: %d", code)
	}
	ends := map[int32]int64{}
	for i, s := range first {
		ends[s.queueID] = s.maxOffset
		qs[i]["offset"] = s.maxOffset
	}
	// A waits at the ends, on a connection of its own. An attempt given up leaves this read
	// behind: it reports to its channel only, never to the test.
	type answer struct {
		secs []docSection
		err  error
	}
	waiting := make(chan answer, 1)
	reads := endpointRequests(t, nc, "member_read")
	nc2 := connect(t, url)
	data, _ := json.Marshal(map[string]any{"topic": "poll", "group": group, "memberId": a.MemberID, "queues": qs, "waitMs": 20000})
	go func() {
		reply, err := nc2.Request(a.API+".read", data, waitTimeout)
		if err != nil {
			waiting <- answer{err: err}
			return
		}
		secs, err := decodeReadReply(reply, len(qs))
		waiting <- answer{secs, err}
	}()
	// The engine has it once micro counts it (its handler then authorizes it at once).
	untilDeadline(t, "A's read reaches the engine", func() bool { return endpointRequests(t, nc, "member_read") > reads })
	if err := nc2.Flush(); err != nil {
		t.Fatal(err)
	}
	// B joins; A releases what it is asked back, at the ends, while its read waits.
	var b docAssignment
	if err := rawCall(t, nc, "$RS.API.group.join", map[string]any{"group": group, "topic": "poll", "clientId": "B"}, &b); err != nil {
		t.Fatal(err)
	}
	var again docAssignment
	if err := rawCall(t, nc, a.API+".group.heartbeat", map[string]any{"group": group, "topic": "poll", "memberId": a.MemberID}, &again); err != nil {
		t.Fatal(err)
	}
	var rq []map[string]any
	for _, q := range again.Revoke {
		rq = append(rq, map[string]any{"queueId": q.QueueID, "epoch": q.Epoch, "offset": ends[q.QueueID]})
	}
	if len(rq) == 0 {
		t.Fatalf("A asked back nothing: %+v", again)
	}
	if err := rawCall(t, nc, a.API+".group.release", map[string]any{"group": group, "topic": "poll", "memberId": a.MemberID, "queues": rq}, nil); err != nil {
		t.Fatal(err)
	}
	moved := again.Revoke[0].QueueID
	var key string
	for i := range 1000 {
		if k := fmt.Sprint("k", i); queueByHash(k, 4) == moved {
			key = k
			break
		}
	}
	body := "after the move to " + group
	ack := stored(t, nc, msg("poll", body, "Rmq-Keys", key))
	if ack.QueueID != moved {
		t.Fatalf("the message went to queue %d, not the moved %d", ack.QueueID, moved)
	}
	var secs []docSection
	select {
	case got := <-waiting:
		if got.err != nil {
			t.Fatalf("A's waiting read: %v", got.err)
		}
		secs = got.secs
	case <-time.After(5 * time.Second):
		return false // the moved queue was not in the wait: the read came after the join
	}
	for _, s := range secs {
		if s.queueID == moved && (s.status != docFenced || len(s.records) != 0) {
			t.Fatalf("A's read that waited while queue %d moved to B: status %d, %d messages; want FENCED without messages", moved, s.status, len(s.records))
		}
	}
	// B holds it now and reads the message.
	var bb docAssignment
	if err := rawCall(t, nc, b.API+".group.heartbeat", map[string]any{"group": group, "topic": "poll", "memberId": b.MemberID}, &bb); err != nil {
		t.Fatal(err)
	}
	for _, q := range bb.Queues {
		if q.QueueID != moved {
			continue
		}
		got, code := rawRead(t, nc, b.API+".read", map[string]any{"topic": "poll", "group": group, "memberId": b.MemberID,
			"queues": []map[string]any{{"queueId": q.QueueID, "epoch": q.Epoch, "offset": q.Offset}}, "waitMs": 5000}, 1)
		if code != 0 || len(got[0].records) != 1 || string(got[0].records[0].body) != body {
			t.Fatalf("B's read of queue %d from %d: %+v (code %d)", q.QueueID, q.Offset, got, code)
		}
		return true
	}
	t.Fatalf("B does not hold queue %d: %+v", moved, bb)
	return false
}

// endpointRequests is how many requests the rocketstore service's endpoint name has received,
// from micro's $SRV.STATS.
func endpointRequests(t *testing.T, nc *nats.Conn, name string) int {
	t.Helper()
	reply, err := nc.Request("$SRV.STATS.rocketstore", nil, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Endpoints []struct {
			Name        string `json:"name"`
			NumRequests int    `json:"num_requests"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(reply.Data, &st); err != nil {
		t.Fatalf("$SRV.STATS.rocketstore: %s: %v", reply.Data, err)
	}
	for _, e := range st.Endpoints {
		if e.Name == name {
			return e.NumRequests
		}
	}
	t.Fatalf("$SRV.STATS.rocketstore has no endpoint %s: %s", name, reply.Data)
	return 0
}
