package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docs/GROUPS.md and `engine consume --help`, `engine groups --help`: the commands as a shell
// script uses them.

// publishN publishes n messages on subject, bodies "<tag><i>", acked, in order.
func publishN(t *testing.T, url, subject, tag string, n int) []ack {
	t.Helper()
	nc := connect(t, url)
	var acks []ack
	for i := range n {
		acks = append(acks, stored(t, nc, msg(subject, fmt.Sprint(tag, i))))
	}
	return acks
}

// lines is out's lines, without the last newline.
func lines(out string) []string {
	if out == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// TestGroupConsumeCLI: engine consume stops after --count messages and commits them, so that
// the next run goes on after them; --until-end drains what is left and exits 0, and drains
// nothing when nothing is left; --format raw writes each body and a newline, ndjson get --json's
// objects; a signal makes it commit what it wrote and leave (exit 0); --start latest reads only
// what comes after the group's first join.
func TestGroupConsumeCLI(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	acks := publishN(t, e.url, "cli", "b", 40)
	src := []string{"--nats", e.url, "--topic", "cli"}

	first := mustCLI(t, append([]string{"consume", "--group", "c", "--count", "10", "--format", "raw"}, src...)...)
	got := lines(first)
	if len(got) != 10 {
		t.Fatalf("--count 10 wrote %d lines: %q", len(got), first)
	}
	st := describe(t, e.url, "c", "cli")
	var committed int64
	for _, q := range st.Queues {
		committed += max(q.Committed, 0)
	}
	if committed != 10 || len(st.Members) != 0 {
		t.Fatalf("after --count 10: %d committed, %d members; want 10 and 0 (it left)", committed, len(st.Members))
	}
	rest := ndjson(t, mustCLI(t, append([]string{"consume", "--group", "c", "--until-end"}, src...)...))
	if len(rest) != 30 {
		t.Fatalf("--until-end after 10 of 40: %d messages", len(rest))
	}
	for _, m := range rest {
		body := b64dec(t, m["body"])
		props, _ := m["properties"].(map[string]any)
		if slices.Contains(got, body) || m["topic"] != "cli" || props["NATS_SUBJECT"] != "cli" || m["msgId"] == "" {
			t.Fatalf("--until-end (ndjson) wrote %v: again, or not get --json's object", m)
		}
		got = append(got, body)
	}
	slices.Sort(got)
	want := make([]string, 0, 40)
	for i := range acks {
		want = append(want, fmt.Sprint("b", i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the two runs wrote %v, want each of %v once", got, want)
	}
	if again := mustCLI(t, append([]string{"consume", "--group", "c", "--until-end"}, src...)...); again != "" {
		t.Fatalf("--until-end with nothing left wrote %q", again)
	}

	// A signal: what was written is committed, and the member leaves.
	l := newLedger()
	c := startConsume(t, l, "sig", e.url, "--group", "sig", "--topic", "cli")
	l.waitFor(t, "the member writes all 40", func() bool { return l.count("sig") == 40 }, c.running)
	c.term()
	st = describe(t, e.url, "sig", "cli")
	for _, q := range st.Queues {
		if q.Committed != q.MaxOffset {
			t.Fatalf("after SIGTERM: queue %d committed at %d of %d", q.QueueID, q.Committed, q.MaxOffset)
		}
	}
	if len(st.Members) != 0 {
		t.Fatalf("after SIGTERM: members %v", st.Members)
	}

	// --start latest: only what is stored after the group's first join.
	late := startConsume(t, l, "late", e.url, "--group", "late", "--topic", "cli", "--start", "latest")
	untilDeadline(t, "the latest member joined", func() bool {
		r := runCLI(t, "groups", "describe", "late", "--topic", "cli", "--json", "--nats", e.url)
		return r.code == 0 && strings.Contains(r.stdout, `"clientId":"late"`)
	})
	publishN(t, e.url, "cli", "new", 3)
	l.waitFor(t, "the latest member writes the new messages", func() bool { return l.count("late") == 3 }, late.running)
	late.term()
	for _, h := range l.snapshot() {
		if h.who == "late" && !strings.HasPrefix(h.body, "new") {
			t.Fatalf("--start latest wrote %q, stored before its join", h.body)
		}
	}
}

// b64dec is a body of the read API's JSON.
func b64dec(t *testing.T, v any) string {
	t.Helper()
	s, _ := v.(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("body %v: %v", v, err)
	}
	return string(b)
}

// TestGroupsCommand: engine groups list, describe, reset (to an offset, to a time, some queues)
// and delete, as tables and as JSON.
func TestGroupsCommand(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	acks := publishN(t, e.url, "gc", "m", 20) // 5 a queue
	online := []string{"--nats", e.url}
	for _, g := range []string{"alpha", "beta"} {
		mustCLI(t, append([]string{"consume", "--group", g, "--topic", "gc", "--count", "6"}, online...)...)
	}

	// list: a table, and JSON lines; --match; paging.
	table := mustCLI(t, append([]string{"groups", "list"}, online...)...)
	for _, want := range []string{"GROUP", "TOPIC", "MEMBERS", "LAG", "alpha", "beta", "no members"} {
		if !strings.Contains(table, want) {
			t.Fatalf("groups list does not show %q:\n%s", want, table)
		}
	}
	list := ndjson(t, mustCLI(t, append([]string{"groups", "list", "--json"}, online...)...))
	if len(list) != 2 || list[0]["key"] != "gc@alpha" || list[0]["lagMessages"] != float64(14) || list[0]["members"] != float64(0) {
		t.Fatalf("groups list --json: %v", list)
	}
	if got := ndjson(t, mustCLI(t, append([]string{"groups", "list", "--json", "--match", "bet"}, online...)...)); len(got) != 1 || got[0]["group"] != "beta" {
		t.Fatalf("groups list --match bet: %v", got)
	}
	page := mustCLI(t, append([]string{"groups", "list", "--max", "1"}, online...)...)
	if !strings.Contains(page, "alpha") || strings.Contains(page, "beta") || !strings.Contains(page, "more groups: --after gc@alpha") {
		t.Fatalf("groups list --max 1:\n%s", page)
	}
	if next := ndjson(t, mustCLI(t, append([]string{"groups", "list", "--json", "--after", "gc@alpha"}, online...)...)); len(next) != 1 || next[0]["group"] != "beta" {
		t.Fatalf("groups list --after gc@alpha: %v", next)
	}

	// describe: a table (JSON: describe() everywhere), with no members, then with one.
	desc := mustCLI(t, append([]string{"groups", "describe", "alpha", "--topic", "gc"}, online...)...)
	for _, want := range []string{"group alpha on topic gc: 0 members, lag 14 messages", "QUEUE", "COMMITTED"} {
		if !strings.Contains(desc, want) {
			t.Fatalf("groups describe does not show %q:\n%s", want, desc)
		}
	}
	nc := connect(t, e.url)
	var a docAssignment
	if err := rawCall(t, nc, "$RS.API.group.join", map[string]any{"group": "alpha", "topic": "gc", "clientId": "by hand"}, &a); err != nil {
		t.Fatal(err)
	}
	desc = mustCLI(t, append([]string{"groups", "describe", "alpha", "--topic", "gc"}, online...)...)
	for _, want := range []string{"group alpha on topic gc: 1 members", a.MemberID + "  by hand", "0, 1, 2, 3", "REBALANCE", "join"} {
		if !strings.Contains(desc, want) {
			t.Fatalf("groups describe with a member does not show %q:\n%s", want, desc)
		}
	}
	if err := rawCall(t, nc, a.API+".group.leave", map[string]any{"group": "alpha", "topic": "gc", "memberId": a.MemberID}, nil); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, append([]string{"groups", "describe", "nobody", "--topic", "gc"}, online...)...); r.code != 1 || !strings.Contains(r.stderr, `no group "nobody"`) {
		t.Fatalf("describe of an unknown group: exit %d %q", r.code, r.stderr)
	}

	// reset to an offset, some queues only, then all.
	out := mustCLI(t, append([]string{"groups", "reset", "alpha", "--topic", "gc", "--offset", "2", "--queue", "0,2"}, online...)...)
	if strings.TrimSpace(out) != "group alpha on gc reset: 0=2 2=2" {
		t.Fatalf("reset --queue 0,2: %q", out)
	}
	c := describe(t, e.url, "alpha", "gc").committed()
	if c[0] != 2 || c[2] != 2 || c[1] == 2 || c[3] == 2 {
		t.Fatalf("after reset of queues 0 and 2: %v", c)
	}
	var reset struct {
		Queues []struct {
			QueueID int32 `json:"queueId"`
			Offset  int64 `json:"offset"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"groups", "reset", "alpha", "--topic", "gc", "--offset", "1", "--json"}, online...)...)), &reset); err != nil || len(reset.Queues) != 4 {
		t.Fatalf("reset --json: %+v %v", reset, err)
	}
	for q, off := range describe(t, e.url, "alpha", "gc").committed() {
		if off != 1 {
			t.Fatalf("after reset to 1: queue %d at %d", q, off)
		}
	}
	// What the group reads next is where the reset put it.
	next := ndjson(t, mustCLI(t, append([]string{"consume", "--group", "alpha", "--topic", "gc", "--until-end"}, online...)...))
	if len(next) != 16 {
		t.Fatalf("after reset to 1: consume wrote %d, want 4 queues x 4", len(next))
	}
	for _, m := range next {
		if m["queueOffset"].(float64) < 1 {
			t.Fatalf("after reset to 1: consume wrote %v", m)
		}
	}

	// reset to a time: each queue's first message stored at or after it, as engine offsets --time.
	at := acks[9].StoreTimestamp
	out = mustCLI(t, append([]string{"groups", "reset", "beta", "--topic", "gc", "--time", strconv.FormatInt(at, 10)}, online...)...)
	byTime := map[string]string{}
	for _, q := range ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "gc", "--time", strconv.FormatInt(at, 10), "--json"}, online...)...)) {
		byTime[fmt.Sprint(q["queueId"])] = fmt.Sprint(q["offset"])
	}
	for q, off := range describe(t, e.url, "beta", "gc").committed() {
		if fmt.Sprint(off) != byTime[fmt.Sprint(q)] || !strings.Contains(out, fmt.Sprintf("%d=%d", q, off)) {
			t.Fatalf("reset --time %d: queue %d at %d; engine offsets --time says %v; printed %q", at, q, off, byTime, out)
		}
	}
	// From the acks: per queue, the first message stored at or after the time.
	first := map[int32]int64{}
	for _, a := range acks {
		if _, ok := first[a.QueueID]; !ok && a.StoreTimestamp >= at {
			first[a.QueueID] = a.QueueOffset
		}
	}
	for q, off := range first {
		if byTime[fmt.Sprint(q)] != fmt.Sprint(off) {
			t.Fatalf("reset --time %d: %v, the acks say queue %d from %d", at, byTime, q, off)
		}
	}

	// delete: gone from describe and list; a second delete says there is nothing.
	if out := mustCLI(t, append([]string{"groups", "delete", "beta", "--topic", "gc"}, online...)...); strings.TrimSpace(out) != "group beta on gc deleted" {
		t.Fatalf("delete: %q", out)
	}
	if r := runCLI(t, append([]string{"groups", "describe", "beta", "--topic", "gc"}, online...)...); r.code != 1 {
		t.Fatalf("describe after delete: exit %d %q", r.code, r.stdout)
	}
	if got := groupNames(t, e.url); !slices.Equal(got, []string{"gc@alpha"}) {
		t.Fatalf("list after delete: %v", got)
	}
	if r := runCLI(t, append([]string{"groups", "delete", "beta", "--topic", "gc"}, online...)...); r.code != 1 || !strings.Contains(r.stderr, "no offsets") {
		t.Fatalf("a second delete: exit %d %q", r.code, r.stderr)
	}
}

// TestGroupMetricsAndStatus: /status's groups and /metrics' group series: counts of groups and
// members, the events, and the lag of groups with members, labelled by group and topic for at
// most the 100 most lagging (150 groups here), so that the label set stays bounded.
func TestGroupMetricsAndStatus(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--group-session-timeout", "5m")
	publishN(t, e.url, "lag", "x", 800) // 200 a queue
	nc := connect(t, e.url)
	const groups = 150
	for i := range groups {
		g := fmt.Sprint("g", i)
		// Group i committed at i in every queue: its lag is 4 x (200 - i).
		if err := rawCall(t, nc, "$RS.API.group.reset", map[string]any{"group": g, "topic": "lag", "offset": i}, nil); err != nil {
			t.Fatal(err)
		}
		if err := rawCall(t, nc, "$RS.API.group.join", map[string]any{"group": g, "topic": "lag", "clientId": g}, nil); err != nil {
			t.Fatal(err)
		}
	}
	m := scrapeMetrics(t, e.http)
	if m["rocketstore_groups"] != groups || m["rocketstore_group_members"] != groups || m[`rocketstore_group_events_total{event="join"}`] != groups {
		t.Fatalf("groups %v, members %v, joins %v; want %d each", m["rocketstore_groups"], m["rocketstore_group_members"],
			m[`rocketstore_group_events_total{event="join"}`], groups)
	}
	labelled := 0
	for name, v := range m {
		rest, ok := strings.CutPrefix(name, `rocketstore_group_lag_messages{group="g`)
		if !ok {
			continue
		}
		labelled++
		i, err := strconv.Atoi(strings.TrimSuffix(rest, `",topic="lag"}`))
		if err != nil || i >= 100 || v != float64(4*(200-i)) {
			t.Errorf("%s %v: not one of the 100 most lagging, or not its lag %d", name, v, 4*(200-i))
		}
		if age := m[strings.Replace(name, "lag_messages", "lag_seconds", 1)]; age <= 0 {
			t.Errorf("%s: lag in time %v", name, age)
		}
	}
	if labelled != 100 {
		t.Errorf("%d groups labelled in rocketstore_group_lag_messages, want the 100 most lagging of %d", labelled, groups)
	}
	_, body := httpGet(t, e.http+"/status")
	var st struct {
		Groups struct {
			Groups  int   `json:"groups"`
			Members int   `json:"members"`
			Joins   int64 `json:"joins"`
			Lag     []struct {
				Group    string `json:"group"`
				Topic    string `json:"topic"`
				Members  int    `json:"members"`
				Messages int64  `json:"lag_messages"`
			} `json:"lag"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Groups.Groups != groups || st.Groups.Members != groups || st.Groups.Joins != groups || len(st.Groups.Lag) != 100 ||
		st.Groups.Lag[0].Group != "g0" || st.Groups.Lag[0].Messages != 800 || st.Groups.Lag[0].Members != 1 || st.Groups.Lag[99].Group != "g99" {
		t.Fatalf("/status groups: %d groups, %d members, %d joins, %d lagging listed (first %+v)", st.Groups.Groups, st.Groups.Members,
			st.Groups.Joins, len(st.Groups.Lag), st.Groups.Lag[:min(len(st.Groups.Lag), 1)])
	}
}
