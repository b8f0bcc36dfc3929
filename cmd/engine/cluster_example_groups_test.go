package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A consumer group spanning the three engines of the documented example (docs/GROUPS.md,
// "Groups across engines"): `engine consume --partitions 64` members, each connected to another
// server of the cluster.

// groupMember is `engine consume` in a child process (this test binary as the engine), its
// NDJSON output followed line by line.
type groupMember struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	stderr strings.Builder
	exited chan struct{}
	code   int
}

// groupLedger is every message the members wrote: by partition and offset, who wrote it.
type groupLedger struct {
	mu      sync.Mutex
	by      map[[2]int64][]string
	changed chan struct{}
}

func startGroupMember(t *testing.T, l *groupLedger, name, url string) *groupMember {
	t.Helper()
	cmd := exec.Command(os.Args[0], "consume", "--nats", url, "--partitions", "64", "--group", "g", "--topic", "orders",
		"--format", "ndjson", "--client-id", name, "--batch", "32")
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0")
	m := &groupMember{t: t, name: name, cmd: cmd, exited: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		b, _ := io.ReadAll(errOut)
		m.mu.Lock()
		m.stderr.Write(b)
		m.mu.Unlock()
	})
	readers.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var msg struct {
				QueueID     int64 `json:"queueId"`
				QueueOffset int64 `json:"queueOffset"`
			}
			if json.Unmarshal(sc.Bytes(), &msg) == nil {
				l.add([2]int64{msg.QueueID, msg.QueueOffset}, name)
			}
		}
	})
	go func() {
		readers.Wait()
		_ = cmd.Wait()
		m.code = cmd.ProcessState.ExitCode()
		close(m.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-m.exited:
		default:
			_ = cmd.Process.Kill()
			<-m.exited
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if t.Failed() || strings.Contains(m.stderr.String(), "DATA RACE") {
			t.Errorf("engine consume %s (exit %d) stderr:\n%s", name, m.code, m.stderr.String())
		}
	})
	return m
}

// term stops the member as a signal does: it commits what it wrote and leaves; exit 0.
func (m *groupMember) term() {
	m.t.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(waitTimeout):
		m.t.Fatalf("engine consume %s still runs %v after SIGTERM", m.name, waitTimeout)
	}
	if m.code != 0 {
		m.t.Fatalf("engine consume %s: exit %d after SIGTERM", m.name, m.code)
	}
}

func (l *groupLedger) add(pos [2]int64, who string) {
	l.mu.Lock()
	l.by[pos] = append(l.by[pos], who)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// waitAll waits until every position of want was written.
func (l *groupLedger) waitAll(t *testing.T, want [][2]int64, members ...*groupMember) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		l.mu.Lock()
		missing := 0
		for _, p := range want {
			if len(l.by[p]) == 0 {
				missing++
			}
		}
		l.mu.Unlock()
		if missing == 0 {
			return
		}
		for _, m := range members {
			select {
			case <-m.exited:
				t.Fatalf("engine consume %s exited (code %d) with %d messages not written", m.name, m.code, missing)
			default:
			}
		}
		select {
		case <-l.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d of %d messages not written within %v", missing, len(want), waitTimeout)
		}
	}
}

// exampleGroup is `engine groups describe --partitions 64 --json` of the example's group.
type exampleGroup struct {
	Members []struct {
		MemberID string  `json:"memberId"`
		ClientID string  `json:"clientId"`
		Queues   []int64 `json:"queues"`
	} `json:"members"`
	Rebalances []struct {
		Reason string `json:"reason"`
	} `json:"rebalances"`
	Queues []struct {
		QueueID   int64  `json:"queueId"`
		Owner     string `json:"owner"`
		Revoking  bool   `json:"revoking"`
		Committed int64  `json:"committed"`
		MaxOffset int64  `json:"maxOffset"`
	} `json:"queues"`
}

// spread is, per client id, how many partitions it holds on each engine (the example's owned
// ranges), once every partition is held by one of members and none is being released.
func (x *example) groupSpread(t *testing.T, url string, members int) map[string][3]int {
	t.Helper()
	ranges := [3][2]int64{{0, 21}, {22, 42}, {43, 63}}
	deadline := time.Now().Add(waitTimeout)
	for {
		var g exampleGroup
		out := runCLI(t, "groups", "describe", "g", "--topic", "orders", "--nats", url, "--partitions", "64", "--json")
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("groups describe: %v: %s", err, out)
		}
		client := map[string]string{}
		for _, m := range g.Members {
			client[m.MemberID] = m.ClientID
		}
		spread := map[string][3]int{}
		settled := len(g.Members) == members && len(g.Queues) == 64
		for _, q := range g.Queues {
			c, ok := client[q.Owner]
			if !ok || q.Revoking {
				settled = false
				continue
			}
			s := spread[c]
			for e, r := range ranges {
				if q.QueueID >= r[0] && q.QueueID <= r[1] {
					s[e]++
				}
			}
			spread[c] = s
		}
		if settled {
			return spread
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not settle with %d members on every engine within %v: %s", members, waitTimeout, out)
		}
		time.Sleep(50 * time.Millisecond) // another process's state: polled
	}
}

// TestClusterExampleGroup: on scripts/cluster-example.sh's three engines (64 partitions), three
// `engine consume --partitions 64` members, each connected to another server, share topic orders:
// together they read every partition of the three engines, each message once; each engine spreads
// its partitions evenly (7 or 8 of its 21 or 22 to each) and the members' totals are within one
// of each other (21 or 22); one member leaving (SIGTERM) moves its partitions on every engine to
// the other two, whose totals are again within one (32 and 32: the engines with an odd count give
// their extra partition to different members), and which read what comes next, each message once.
func TestClusterExampleGroup(t *testing.T) {
	x := startExample(t, "")
	for i := 1; i <= 3; i++ {
		x.waitLog(i, "engine running")
	}
	x.waitAllReady()
	nc, err := nats.Connect(x.clientURL(1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	keys := partitionKeys(examplePartitions)
	for _, key := range keys {
		waitResponder(t, nc, "orders."+key)
	}
	var want [][2]int64
	publish := func(round, perKey int) {
		t.Helper()
		for n := range perKey {
			for _, key := range keys {
				m := nats.NewMsg("orders." + key)
				m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("r%d-%s-%d", round, key, n))
				m.Data = fmt.Appendf(nil, "%s %d %d", key, round, n)
				reply, err := requestOwned(nc, m)
				if err != nil {
					t.Fatalf("orders.%s: %v", key, err)
				}
				var ack struct {
					QueueID     int64 `json:"queueId"`
					QueueOffset int64 `json:"queueOffset"`
				}
				if err := json.Unmarshal(reply.Data, &ack); err != nil {
					t.Fatalf("orders.%s: %s", key, reply.Data)
				}
				want = append(want, [2]int64{ack.QueueID, ack.QueueOffset})
			}
		}
	}
	publish(1, 3)

	l := &groupLedger{by: map[[2]int64][]string{}, changed: make(chan struct{}, 1)}
	members := []*groupMember{
		startGroupMember(t, l, "c1", x.clientURL(1)),
		startGroupMember(t, l, "c2", x.clientURL(2)),
		startGroupMember(t, l, "c3", x.clientURL(3)),
	}
	l.waitAll(t, want, members...)
	spread := x.groupSpread(t, x.clientURL(2), 3)
	total := map[string]int{}
	for c, s := range spread {
		for e, n := range s {
			if size := []int{22, 21, 21}[e]; n < size/3 || n > size/3+1 {
				t.Errorf("%s holds %d of engine %d's %d partitions: %v", c, n, e+1, size, spread)
			}
			total[c] += n
		}
	}
	for c, n := range total {
		if n < 21 || n > 22 {
			t.Errorf("%s holds %d partitions in all, want 21 or 22 (64 over 3): %v", c, n, spread)
		}
	}
	t.Logf("three members: %v", spread)

	// c2 leaves: its partitions move to c1 and c3 on every engine.
	members[1].term()
	after := x.groupSpread(t, x.clientURL(3), 2)
	if _, ok := after["c2"]; ok || len(after) != 2 {
		t.Fatalf("after c2 left: %v", after)
	}
	for e := range 3 {
		if got := after["c1"][e] + after["c3"][e]; got != []int{22, 21, 21}[e] {
			t.Errorf("engine %d: c1 and c3 hold %d of its partitions: %v", e+1, got, after)
		}
	}
	// Engines 2 and 3 each have one partition over an even split: different members take them.
	if t1, t3 := after["c1"][0]+after["c1"][1]+after["c1"][2], after["c3"][0]+after["c3"][1]+after["c3"][2]; t1-t3 > 1 || t3-t1 > 1 {
		t.Errorf("c1 holds %d partitions in all, c3 %d: not within one: %v", t1, t3, after)
	}
	t.Logf("after c2 left: %v", after)
	// Its leave reached every engine: none took its partitions for a session that ran out.
	var g exampleGroup
	if err := json.Unmarshal([]byte(runCLI(t, "groups", "describe", "g", "--topic", "orders", "--nats", x.clientURL(1), "--partitions", "64", "--json")), &g); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Rebalances {
		if r.Reason != "join" && r.Reason != "leave" {
			t.Errorf("a rebalance for %q: %+v", r.Reason, g.Rebalances)
		}
	}
	publish(2, 2)
	l.waitAll(t, want, members[0], members[2])
	members[0].term()
	members[2].term()

	l.mu.Lock()
	for pos, who := range l.by {
		if len(who) != 1 {
			t.Errorf("partition %d offset %d written by %v", pos[0], pos[1], who)
		}
	}
	if len(l.by) != len(want) {
		t.Errorf("%d messages written, %d published", len(l.by), len(want))
	}
	l.mu.Unlock()
	if code := x.stop(); code != 0 {
		t.Fatalf("the example exited %d after SIGTERM", code)
	}
}
