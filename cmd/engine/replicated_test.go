package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Replicated mode as a user runs it (docs/SCALE-OUT.md, "Replicated mode"): `engine run
// --replicated` against JetStream servers, the wire spoken with plain nats.go and JSON.

// replTestParts is the partition count of these tests.
const replTestParts = 8

// jsServers are the options of a three-server JetStream cluster with the partition mapping of
// orders.* (a fresh account each: see internal/natstest). None is started. Only the first server's
// route port is picked ahead (it is started first, so the window in which another process could
// take that port is short); the other two listen for routes on ports of their own and join
// through the first, as a seed server is used. A route port picked ahead for a server started
// seconds later could be taken meanwhile by a test running in parallel, and nats-server does not
// report that bind failure to a caller that set no logger: it is never ready.
func jsServers(t *testing.T) []*server.Options {
	t.Helper()
	seed := freePort(t)
	routes := server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", seed))
	var out []*server.Options
	for i := range 3 {
		acc := server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT)
		if err := acc.AddMapping("orders.*", fmt.Sprintf("rmq.p.{{partition(%d,1)}}.orders.{{wildcard(1)}}", replTestParts)); err != nil {
			t.Fatal(err)
		}
		port := server.RANDOM_PORT
		if i == 0 {
			port = seed
		}
		out = append(out, &server.Options{
			ServerName: fmt.Sprintf("S%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
			JetStream: true, StoreDir: t.TempDir(), SyncAlways: true,
			Cluster:  server.ClusterOpts{Name: "repl", Host: "127.0.0.1", Port: port},
			Routes:   routes,
			Accounts: []*server.Account{acc},
		})
	}
	return out
}

// startServer starts a server and waits until it takes connections; what it reported as an error
// on the way is in the failure.
func startServer(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	errs := &serverErrors{}
	s.SetLoggerV2(errs, false, false, false)
	go s.Start()
	if !s.ReadyForConnections(waitTimeout) {
		s.Shutdown()
		t.Fatalf("server %s not ready within %v; it reported: %s", o.ServerName, waitTimeout, errs)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// serverErrors keeps what a test server reports as an error or a fatal error, nothing else.
type serverErrors struct {
	mu   sync.Mutex
	msgs []string
}

func (e *serverErrors) add(level, format string, v ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.msgs) < 20 {
		e.msgs = append(e.msgs, level+": "+fmt.Sprintf(format, v...))
	}
}

func (e *serverErrors) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.msgs) == 0 {
		return "no error"
	}
	return strings.Join(e.msgs, "; ")
}

func (e *serverErrors) Noticef(string, ...any)         {}
func (e *serverErrors) Warnf(string, ...any)           {}
func (e *serverErrors) Debugf(string, ...any)          {}
func (e *serverErrors) Tracef(string, ...any)          {}
func (e *serverErrors) Errorf(format string, v ...any) { e.add("error", format, v...) }
func (e *serverErrors) Fatalf(format string, v ...any) { e.add("fatal", format, v...) }

// TestReplicatedWaitsForCluster: an engine started in replicated mode against one server of a
// three-server JetStream cluster whose other two are not up yet (no meta leader can be elected:
// no stream can be made) does not exit. It waits, logs that it waits, and /readyz answers 503
// saying so; once the other two servers are up it makes the partitions' streams, turns ready
// and stores what is published.
func TestReplicatedWaitsForCluster(t *testing.T) {
	opts := jsServers(t)
	first := startServer(t, opts[0])
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := startChild(t, append(storeArgs(t.TempDir()), "--server", first.ClientURL(), "--partitions", strconv.Itoa(replTestParts),
		"--owned-partitions", fmt.Sprintf("0-%d", replTestParts-1), "--topic-tokens", "1", "--replicated",
		"--http", httpAddr, "--store-host", "127.0.0.1:10931")...)
	c.waitLog(0, "engine running")
	// The first attempt has timed out; before the fix the engine exited at this point.
	c.waitLog(0, "ingress: replicated: waiting for JetStream")
	code, body := httpGet("http://" + httpAddr + "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "replicated: waiting for JetStream") {
		t.Fatalf("/readyz while the cluster is not formed: %d %s", code, body)
	}
	startServer(t, opts[1])
	startServer(t, opts[2])
	deadline := time.Now().Add(waitTimeout)
	for {
		if code, body = httpGet("http://" + httpAddr + "/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within %v once the cluster formed: %d %s", waitTimeout, code, body)
		}
		time.Sleep(50 * time.Millisecond) // an outside process: its answers are all there is
	}
	nc, err := nats.Connect(first.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	keys := partitionKeys(replTestParts)
	m := nats.NewMsg("orders." + keys[3])
	m.Header.Set(nats.MsgIdHdr, "w-1")
	m.Data = []byte("after the wait")
	reply, err := nc.RequestMsg(m, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Stream != "RMQ_P3" || ack.Seq != 1 {
		t.Fatalf("JetStream ack %s (%v)", reply.Data, err)
	}
	for {
		reply, err := nc.Request("$RS.API.p.3.get", getRequest(3), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var g wireGet
		if err := json.Unmarshal(reply.Data, &g); err != nil {
			t.Fatalf("%s: %v", reply.Data, err)
		}
		if len(g.Messages) == 1 && string(g.Messages[0].Body) == "after the wait" && g.Messages[0].UniqKey == "w-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not stored within %v: %s", waitTimeout, reply.Data)
		}
		time.Sleep(50 * time.Millisecond) // the engine stores after JetStream acked: no event to wait on
	}
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestReplicatedConfigErrors: what retrying cannot cure still ends the start, with the reason:
// replicated mode on an embedded server without JetStream, and R3 streams on a JetStream server
// that is not clustered (JetStream refuses them).
func TestReplicatedConfigErrors(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "js.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "listen: 127.0.0.1:-1\njetstream { store_dir: %q }\n", filepath.Join(dir, "js")), 0o600); err != nil {
		t.Fatal(err)
	}
	repl := []string{"--partitions", strconv.Itoa(replTestParts), "--owned-partitions", "0-7", "--replicated",
		"--store-host", "127.0.0.1:10932"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no JetStream", []string{"--listen", "127.0.0.1:-1"}, "replicated mode needs JetStream"},
		{"R3 on one server", []string{"--nats-config", conf}, "replicas > 1 not supported in non-clustered mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startChild(t, append(append(storeArgs(t.TempDir()), repl...), tc.args...)...)
			if code := c.wait(); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			if !strings.Contains(c.log(), tc.want) {
				t.Fatalf("the log does not say %q:\n%s", tc.want, c.log())
			}
		})
	}
}
