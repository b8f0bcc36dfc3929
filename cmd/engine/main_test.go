package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// These tests run the real command in a child process: the test binary re-executes itself with
// childEnv set, and TestMain then runs main() with the arguments given, as the installed binary
// would. The child logs JSON to stderr; the tests follow its log lines (each one an event) to
// know when it listens, when it drains, and how it stopped.

const childEnv = "ENGINE_MAIN_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitTimeout bounds every wait; only a failing test reaches it.
const waitTimeout = 60 * time.Second

// Small files, so that a test store costs a few MiB.
const (
	commitLogSize = 4 << 20
	cqUnits       = 1000
)

func storeArgs(dir string) []string {
	return []string{"run", "--store", dir, "--log-format", "json", "--log-level", "info",
		"--commit-log-size", fmt.Sprint(commitLogSize), "--cq-units", fmt.Sprint(cqUnits),
		"--index-slots", "1024", "--index-entries", "8192"}
}

// child is the command running in a child process.
type child struct {
	t   testing.TB
	cmd *exec.Cmd

	mu     sync.Mutex
	lines  []map[string]any // the JSON log lines so far
	raw    []string
	notify chan struct{} // a value after each new line (capacity 1)

	exited chan struct{} // closed once the process has exited and its stderr is read
	code   int           // its exit code, set before exited is closed
}

func startChild(t testing.TB, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// atexit_sleep_ms=0: under -race the child would otherwise linger a second after exiting.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, notify: make(chan struct{}, 1), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil {
				m = map[string]any{"message": line} // not a log line (a panic, a race report)
			}
			c.mu.Lock()
			c.lines, c.raw = append(c.lines, m), append(c.raw, line)
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		c.code = cmd.ProcessState.ExitCode()
		if err != nil && c.code < 0 {
			c.code = -1
		}
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			t.Logf("child %v log:\n%s", args, c.log())
		}
	})
	return c
}

func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.raw, "\n")
}

// waitLog returns the first log line from index from on whose message starts with prefix, and
// its index; it fails the test if the child exits first or the wait times out.
func (c *child) waitLog(from int, prefix string) (map[string]any, int) {
	c.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		for i := from; i < len(c.lines); i++ {
			if msg, _ := c.lines[i]["message"].(string); strings.HasPrefix(msg, prefix) {
				line := c.lines[i]
				c.mu.Unlock()
				return line, i
			}
		}
		from = len(c.lines)
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-c.exited:
			// The reader has stopped: one last look at what it read.
			c.mu.Lock()
			n := len(c.lines)
			c.mu.Unlock()
			if from == n {
				c.t.Fatalf("child exited (code %d) before logging %q", c.code, prefix)
			}
		case <-deadline.C:
			c.t.Fatalf("child did not log %q within %v", prefix, waitTimeout)
		}
	}
}

func (c *child) signal(sig os.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait returns the child's exit code once it has exited.
func (c *child) wait() int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.code
	case <-time.After(waitTimeout):
		c.t.Fatalf("child still running %v after it was told to stop", waitTimeout)
		return 0
	}
}

// runEmbedded starts the command with its embedded server on a random loopback port and
// returns the child and the server's URL, read from its "engine running" line.
func runEmbedded(t testing.TB, dir string) (*child, string, map[string]any) {
	t.Helper()
	c := startChild(t, append(storeArgs(dir), "--listen", "127.0.0.1:-1")...)
	recovered, _ := c.waitLog(0, "store recovered")
	running, _ := c.waitLog(0, "engine running")
	url, _ := running["nats"].(string)
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":-1") {
		t.Fatalf("engine running on %q", url)
	}
	return c, url, recovered
}

// sent is a message published with a request, and its ack.
type sent struct {
	subject string
	body    []byte
	ack     wire.Ack
}

// publish sends groups × perGroup requests to url: one goroutine per group, each on its own
// subject and in order, so that every queue's offsets grow in publish order. It returns what
// was acked, by group.
func publish(t testing.TB, url string, round, groups, perGroup int) [][]sent {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	out := make([][]sent, groups)
	errs := make(chan error, groups)
	for g := range groups {
		go func() {
			for i := range perGroup {
				m := nats.NewMsg(fmt.Sprintf("orders.g%d", g))
				m.Data = fmt.Appendf(nil, "round %d group %d message %d", round, g, i)
				m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("r%d-g%d-%d", round, g, i))
				reply, err := nc.RequestMsg(m, waitTimeout)
				if err != nil {
					errs <- fmt.Errorf("group %d message %d: %w", g, i, err)
					return
				}
				a, err := wire.ParseReply(reply.Data)
				if err != nil {
					errs <- fmt.Errorf("group %d message %d: %w", g, i, err)
					return
				}
				out[g] = append(out[g], sent{subject: m.Subject, body: m.Data, ack: a})
			}
			errs <- nil
		}()
	}
	var all []error
	for range groups {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
	return out
}

type queueKey struct {
	topic string
	queue int32
}

// offsetsByQueue lists the acked queue offsets of each queue, in publish order.
func offsetsByQueue(groups ...[][]sent) map[queueKey][]int64 {
	out := map[queueKey][]int64{}
	for _, gs := range groups {
		for _, g := range gs {
			for _, s := range g {
				k := queueKey{s.ack.Topic, s.ack.QueueID}
				out[k] = append(out[k], s.ack.QueueOffset)
			}
		}
	}
	return out
}

// checkOffsetsContinue checks that each queue's acked offsets, old then new, are 0, 1, 2, ...:
// the first new one is the last old one + 1, with no gap and no reuse.
func checkOffsetsContinue(t testing.TB, old, more [][]sent) {
	t.Helper()
	before := offsetsByQueue(old)
	for k, offs := range offsetsByQueue(old, more) {
		for i, off := range offs {
			if off != int64(i) {
				prev := before[k]
				t.Fatalf("%s/%d: offset %d at position %d (%d acked before the restart, the last at %d)",
					k.topic, k.queue, off, i, len(prev), prev[len(prev)-1])
			}
		}
	}
	if len(offsetsByQueue(more)) == 0 {
		t.Fatal("nothing published after the restart")
	}
}

// checkStore opens the stopped store's ConsumeQueues and CommitLog and reads back every acked
// message: each queue holds exactly the acked messages, and each unit points at the record that
// was sent.
func checkStore(t testing.TB, dir string, groups ...[][]sent) {
	t.Helper()
	cqs, err := consumequeue.Open(consumequeue.Options{FS: vfs.Default, Root: dir, UnitsPerFile: cqUnits})
	if err != nil {
		t.Fatal(err)
	}
	defer cqs.Close()
	if _, err := cqs.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := cqs.RecoverAll(); err != nil {
		t.Fatal(err)
	}
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: vfs.Default, Dir: filepath.Join(dir, "commitlog"), FileSize: commitLogSize, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	counts := map[queueKey]int64{}
	for _, gs := range groups {
		for _, g := range gs {
			for _, s := range g {
				a := s.ack
				counts[queueKey{a.Topic, a.QueueID}]++
				cq := cqs.Find(a.Topic, a.QueueID)
				if cq == nil {
					t.Fatalf("no consumequeue %s/%d", a.Topic, a.QueueID)
				}
				u, err := cq.Unit(a.QueueOffset)
				if err != nil {
					t.Fatalf("%s/%d@%d: %v", a.Topic, a.QueueID, a.QueueOffset, err)
				}
				if u.Phys != a.CommitLogOffset {
					t.Fatalf("%s/%d@%d: unit at %d, acked at %d", a.Topic, a.QueueID, a.QueueOffset, u.Phys, a.CommitLogOffset)
				}
				v, release, err := log.Read(u.Phys)
				if err != nil {
					t.Fatal(err)
				}
				subject, _ := v.Properties().Get(ingress.PropNatsSubject)
				ok := string(v.Topic()) == a.Topic && v.QueueID() == a.QueueID && v.QueueOffset() == a.QueueOffset &&
					bytes.Equal(v.Body(), s.body) && string(subject) == s.subject
				got := fmt.Sprintf("%s/%d@%d %q subject %q", v.Topic(), v.QueueID(), v.QueueOffset(), v.Body(), subject)
				release()
				if !ok {
					t.Fatalf("%s/%d@%d holds %s, want %q on %s", a.Topic, a.QueueID, a.QueueOffset, got, s.body, s.subject)
				}
			}
		}
	}
	for k, n := range counts {
		if got := cqs.Find(k.topic, k.queue).MaxOffset(); got != n {
			t.Fatalf("%s/%d holds %d units, %d were acked", k.topic, k.queue, got, n)
		}
	}
	if len(cqs.Queues()) != len(counts) {
		t.Fatalf("%d consumequeues on disk, %d acked to", len(cqs.Queues()), len(counts))
	}
}

func abortExists(t testing.TB, dir string) bool {
	t.Helper()
	ok, err := meta.AbortExists(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestRunRestartAfterSIGTERM: SIGTERM stops the command cleanly (exit 0, no abort file), and a
// new run on the same store starts from the checkpoint without rescanning, keeps every acked
// message and continues every queue's offsets.
func TestRunRestartAfterSIGTERM(t *testing.T) {
	const groups = 8
	perGroup := 250
	if testing.Short() {
		perGroup = 50
	}
	dir := t.TempDir()

	c, url, _ := runEmbedded(t, dir)
	first := publish(t, url, 0, groups, perGroup)
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	c.waitLog(0, "stopped cleanly")
	if abortExists(t, dir) {
		t.Fatal("abort file left after a clean stop")
	}

	c, url, rec := runEmbedded(t, dir)
	if rec["clean_exit"] != true || rec["from_checkpoint"] != true || rec["records"] != float64(0) {
		t.Fatalf("restart after a clean stop: %v, want clean_exit, from_checkpoint and 0 records rescanned", rec)
	}
	second := publish(t, url, 1, groups, perGroup/2)
	checkOffsetsContinue(t, first, second)
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	if abortExists(t, dir) {
		t.Fatal("abort file left after a clean stop")
	}
	checkStore(t, dir, first, second)
}

// stallProxy forwards TCP connections to a NATS server and can hold everything the server
// sends from some point on: a client behind it then never gets the PONG of a flush, so a drain
// cannot finish before nats.go's flush timeout (10 s).
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	quit    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t testing.TB, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, quit: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		close(p.quit)
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed by the cleanup
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		select {
		case <-p.quit:
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		default:
		}
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() { // client -> server, never held
			_, _ = io.Copy(server, client)
			server.Close()
		})
		p.wg.Go(func() { // server -> client, held once stalled
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && p.stalled.Load() {
					<-p.quit // held until the end of the test
					return
				}
				if n > 0 {
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					client.Close()
					return
				}
			}
		})
	}
}

// TestRunSecondSignalExitsAtOnce: a second SIGTERM during the drain exits at once with code 1,
// leaving the abort file, and the next run recovers every acked message. The drain is made to
// last: the command uses an external server behind a proxy that holds what the server sends, so
// the drain's flush waits for a PONG that does not come (nats.go gives up after 10 s); the
// second signal goes out as soon as the command logs that it is draining.
func TestRunSecondSignalExitsAtOnce(t *testing.T) {
	opts := natstest.DefaultTestOptions
	opts.Port = natsserver.RANDOM_PORT
	opts.MaxPayload = 4<<20 + 64<<10
	ns := natstest.RunServer(&opts)
	t.Cleanup(ns.Shutdown)
	proxy := newStallProxy(t, ns.Addr().String())
	dir := t.TempDir()

	c := startChild(t, append(storeArgs(dir), "--nats", proxy.url())...)
	c.waitLog(0, "engine running")
	first := publish(t, ns.ClientURL(), 0, 4, 50)

	proxy.stalled.Store(true)
	c.signal(syscall.SIGTERM)
	_, at := c.waitLog(0, "stopping: draining")
	second := time.Now()
	c.signal(syscall.SIGTERM)
	code := c.wait()
	took := time.Since(second)
	if code != 1 {
		t.Fatalf("exit code %d after a second signal during the drain, want 1", code)
	}
	c.waitLog(at, "second signal")
	if took > 5*time.Second {
		t.Fatalf("exited %v after the second signal; the drain was held for at least 10 s, so it did not exit at once", took)
	}
	t.Logf("exited %v after the second signal", took.Round(time.Millisecond))
	if !abortExists(t, dir) {
		t.Fatal("no abort file after exiting without a drain: the next start would not recover")
	}

	c, url, rec := runEmbedded(t, dir)
	if rec["clean_exit"] != false {
		t.Fatalf("restart after an exit without a drain: %v, want clean_exit false", rec)
	}
	more := publish(t, url, 1, 4, 20)
	checkOffsetsContinue(t, first, more)
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	checkStore(t, dir, first, more)
}
