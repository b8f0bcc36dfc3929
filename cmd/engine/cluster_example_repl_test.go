package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestClusterExampleReplicated runs scripts/cluster-example.sh replicated: the three engines and
// their embedded servers start together, so each engine starts before its cluster has formed and
// elected a JetStream meta leader. Each one waits, saying so on /readyz (503 and why), and then
// serves: the 64 partitions spread evenly over the three, each partition's messages stored by
// the engine it was spread to, readable back. Then engine 3 is killed (its embedded server with
// it): the other two spread its partitions between them and take the messages published after.
// SIGTERM to the script stops the other two cleanly.
func TestClusterExampleReplicated(t *testing.T) {
	began := time.Now()
	x := startExample(t, "replicated")
	for i := 1; i <= 3; i++ {
		x.waitLog(i, "engine running")
	}
	for i, seen := range x.waitAllReady() {
		waited := false
		for _, s := range seen {
			waited = waited || strings.HasPrefix(s, "503 ") && strings.Contains(s, "replicated: ")
		}
		if !waited {
			t.Errorf("engine %d was never seen not ready for replicated mode while its cluster formed: %q", i+1, seen)
		}
	}
	ready := time.Since(began)
	live := []int{1, 2, 3}
	takers := checkSpread(t, x, live)

	nc, err := nats.Connect(x.clientURL(1), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	keys := partitionKeys(examplePartitions)
	publishRound(t, nc, keys, 0)
	waitFloors(t, x, live, takers, 1)
	// Read back: every engine answers a fan-out get with its part of the queue.
	for p, key := range keys {
		got := fanOutGet(t, nc, p, len(live))
		if len(got) != 1 || string(got[0].Body) != key+" 0" || got[0].UniqKey != fmt.Sprintf("m-%d-0", p) ||
			got[0].Properties["Nats-Pin-Id"] != "" {
			t.Fatalf("partition %d: %+v", p, got)
		}
	}

	x.kill(3)
	live = []int{1, 2}
	var spread map[int]int
	deadline := time.Now().Add(waitTimeout)
	for {
		// The survivors hear engine 3 no more and spread its partitions between them.
		ok := true
		for _, i := range live {
			ok = ok && len(x.status(i).NATS.Partitions.Engines) == len(live)
		}
		if ok {
			spread = checkSpread(t, x, live)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the survivors did not drop engine 3 within %v", waitTimeout)
		}
		time.Sleep(100 * time.Millisecond) // an outside process: its status is all there is
	}
	moved := map[int]bool{}
	for p, i := range takers {
		if i == 3 {
			moved[spread[p]] = true
		}
	}
	if !moved[1] || !moved[2] {
		t.Errorf("engine 3's partitions went to %v, not to both survivors", moved)
	}
	publishRound(t, nc, keys, 1)
	waitFloors(t, x, live, spread, 2)

	if code := x.stop(); code != 128+int(syscall.SIGKILL) {
		t.Errorf("the example exited %d, want %d (engine 3's SIGKILL)", code, 128+int(syscall.SIGKILL))
	}
	for _, i := range live {
		x.waitLog(i, "stopped cleanly")
	}
	t.Logf("replicated example: ready after %v, %v in all", ready.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// checkSpread checks that the live engines agree on the live set and that each partition is
// taken by exactly one of them, none more than its share (ceil(P/live)) plus a little; it
// returns who takes each partition.
func checkSpread(t *testing.T, x *example, live []int) map[int]int {
	t.Helper()
	takers := map[int]int{}
	share := (examplePartitions + len(live) - 1) / len(live)
	for _, i := range live {
		st := x.status(i).NATS.Partitions
		if st.Mode != "replicated" || len(st.Engines) != len(live) {
			t.Fatalf("engine %d: mode %q, engines %v, want %d", i, st.Mode, st.Engines, len(live))
		}
		if len(st.Taken) > share+2 {
			t.Errorf("engine %d takes %d partitions, more than its share %d (+2): %v", i, len(st.Taken), share, st.Taken)
		}
		for _, p := range st.Taken {
			if j, ok := takers[p]; ok {
				t.Fatalf("partition %d taken by engines %d and %d", p, j, i)
			}
			takers[p] = i
		}
	}
	if len(takers) != examplePartitions {
		t.Fatalf("%d partitions taken, want %d", len(takers), examplePartitions)
	}
	return takers
}

// publishRound publishes message n of every partition through JetStream, retrying (with the
// same Nats-Msg-Id: JetStream keeps one) while a stream has no leader.
func publishRound(t *testing.T, nc *nats.Conn, keys []string, n int) {
	t.Helper()
	for p, key := range keys {
		m := nats.NewMsg("orders." + key)
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("m-%d-%d", p, n))
		m.Data = fmt.Appendf(nil, "%s %d", key, n)
		deadline := time.Now().Add(waitTimeout)
		for {
			reply, err := nc.RequestMsg(m, 2*time.Second)
			var ack struct {
				Stream string `json:"stream"`
				Seq    uint64 `json:"seq"`
				Error  *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err == nil {
				err = json.Unmarshal(reply.Data, &ack)
			}
			if err == nil && ack.Error == nil && ack.Stream == fmt.Sprintf("RMQ_P%d", p) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("publish orders.%s: %v %+v", key, err, ack)
			}
		}
	}
}

// waitFloors waits until every partition is durable up to sequence seq on the engine it is
// spread to (its /status floors), and checks that no other live engine stored it meanwhile.
func waitFloors(t *testing.T, x *example, live []int, takers map[int]int, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		floors := map[int]map[string]uint64{}
		for _, i := range live {
			floors[i] = x.status(i).NATS.Partitions.Floors
		}
		missing := 0
		for p := range examplePartitions {
			if floors[takers[p]][strconv.Itoa(p)] < seq {
				missing++
			}
		}
		if missing == 0 {
			for p := range examplePartitions {
				for _, i := range live {
					if i != takers[p] && seq == 1 && floors[i][strconv.Itoa(p)] != 0 {
						t.Errorf("partition %d, spread to engine %d, also stored by engine %d", p, takers[p], i)
					}
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d partitions not stored up to %d by their engines within %v: %v", missing, seq, waitTimeout, floors)
		}
		time.Sleep(100 * time.Millisecond) // an outside process: its status is all there is
	}
}

// fanOutGet sends a get of partition p to every engine ($RS.API.all.get) and returns the messages
// of the answers, gathered until n engines answered or a few seconds passed.
func fanOutGet(t *testing.T, nc *nats.Conn, p, n int) []wireMessage {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$RS.API.all.get", inbox, getRequest(p)); err != nil {
		t.Fatal(err)
	}
	var out []wireMessage
	for range n {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			break
		}
		var g wireGet
		if err := json.Unmarshal(m.Data, &g); err != nil {
			t.Fatalf("fan-out get of partition %d: %s: %v", p, m.Data, err)
		}
		out = append(out, g.Messages...)
	}
	return out
}
