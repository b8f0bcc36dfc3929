package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// What the consumer group tests share: `engine consume` as a child process whose stdout is
// followed line by line, a ledger of every message any member handed out, a publisher that
// runs beside them, and `engine groups describe --json`.

// qpos is a message's place: its queue and queue offset.
type qpos struct {
	queue  int32
	offset int64
}

func (p qpos) String() string { return fmt.Sprintf("%d@%d", p.queue, p.offset) }

// handout is one message handed out by one member (a process's incarnation or a doc member).
type handout struct {
	who  string
	pos  qpos
	body string
}

// ledger is every message handed out, in the order the test saw them.
type ledger struct {
	mu      sync.Mutex
	all     []handout
	byPos   map[qpos][]string
	changed chan struct{} // a value after each add (capacity 1)
	minLine int           // the shortest line a consumer wrote, in bytes
}

func (l *ledger) noteLine(n int) {
	l.mu.Lock()
	if l.minLine == 0 || n < l.minLine {
		l.minLine = n
	}
	l.mu.Unlock()
}

func newLedger() *ledger {
	return &ledger{byPos: map[qpos][]string{}, changed: make(chan struct{}, 1)}
}

func (l *ledger) add(h handout) {
	l.mu.Lock()
	l.all = append(l.all, h)
	l.byPos[h.pos] = append(l.byPos[h.pos], h.who)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// docHandle is a doc member's callback, writing to the ledger.
func (l *ledger) docHandle(who string, r docRecord) {
	l.add(handout{who: who, pos: qpos{r.queueID, r.queueOffset}, body: string(r.body)})
}

// count is how many messages were handed out by who ("" for all).
func (l *ledger) count(who string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if who == "" {
		return len(l.all)
	}
	n := 0
	for _, h := range l.all {
		if h.who == who {
			n++
		}
	}
	return n
}

// covers says whether every position of want was handed out at least once.
func (l *ledger) covers(want []qpos) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range want {
		if len(l.byPos[p]) == 0 {
			return false
		}
	}
	return true
}

// snapshot is a copy of what was handed out.
func (l *ledger) snapshot() []handout {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]handout(nil), l.all...)
}

// waitFor waits until cond holds; a check that returns an error (a member that failed) ends
// the wait at once. The ledger's changes wake it; it also looks every 100 ms, since cond may
// depend on something outside (a process's exit).
func (l *ledger) waitFor(t *testing.T, what string, cond func() bool, checks ...func() error) {
	t.Helper()
	deadline := time.NewTimer(2 * waitTimeout)
	defer deadline.Stop()
	for !cond() {
		for _, c := range checks {
			if err := c(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		select {
		case <-l.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("%s: not within %v (%d handed out)", what, 2*waitTimeout, l.count(""))
		}
	}
}

// consumer is `engine consume` running as a child process: each line it writes to stdout goes
// to the ledger as it comes (a line cut by a kill is not a message written).
type consumer struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	stderr strings.Builder
	lines  int

	exited chan struct{}
	code   int
	signal syscall.Signal
}

// startConsume runs `engine consume --nats url --format ndjson` with args, its messages going
// to l under name.
func startConsume(t *testing.T, l *ledger, name, url string, args ...string) *consumer {
	t.Helper()
	all := append([]string{"consume", "--nats", url, "--format", "ndjson", "--client-id", name, "--log-format", "json"}, args...)
	cmd := exec.Command(engineBin, all...)
	cmd.Env = childEnv(nil)
	cmd.Dir = t.TempDir()
	c := &consumer{t: t, name: name, cmd: cmd, exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		b, _ := io.ReadAll(stderr)
		c.mu.Lock()
		c.stderr.Write(b)
		c.mu.Unlock()
	})
	readers.Go(func() { c.follow(l, stdout) })
	go func() {
		readers.Wait()
		_ = cmd.Wait()
		st := cmd.ProcessState
		c.code = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.signal = ws.Signal()
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
		if strings.Contains(c.errText(), "WARNING: DATA RACE") {
			t.Errorf("engine consume %s reported a data race", name)
		}
		if t.Failed() || strings.Contains(c.errText(), "fenced") {
			t.Logf("engine consume %s (exit %d) stderr:\n%s", name, c.code, c.errText())
		}
	})
	return c
}

func (c *consumer) follow(l *ledger, stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			_, _ = io.Copy(io.Discard, r) // a line without its newline was cut by a kill
			return
		}
		var m struct {
			QueueID     int32  `json:"queueId"`
			QueueOffset int64  `json:"queueOffset"`
			Body        string `json:"body"`
		}
		if json.Unmarshal([]byte(line), &m) != nil {
			c.mu.Lock()
			fmt.Fprintf(&c.stderr, "test: not a JSON line on stdout: %q\n", line)
			c.mu.Unlock()
			continue
		}
		body, _ := base64.StdEncoding.DecodeString(m.Body)
		c.mu.Lock()
		c.lines++
		c.mu.Unlock()
		l.noteLine(len(line))
		l.add(handout{who: c.name, pos: qpos{m.QueueID, m.QueueOffset}, body: string(body)})
	}
}

func (c *consumer) errText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// running fails when the process exited: a member that should be running.
func (c *consumer) running() error {
	select {
	case <-c.exited:
		return fmt.Errorf("engine consume %s exited with code %d: %s", c.name, c.code, c.errText())
	default:
		return nil
	}
}

// wait waits for the process to exit and returns its exit code (-1 for a signal).
func (c *consumer) wait() int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.code
	case <-time.After(waitTimeout):
		c.t.Fatalf("engine consume %s still running after %v", c.name, waitTimeout)
		return 0
	}
}

// kill ends the process with SIGKILL.
func (c *consumer) kill() {
	c.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	c.wait()
}

// term sends SIGTERM, which makes consume commit what it wrote and leave; it must exit 0.
func (c *consumer) term() {
	c.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		c.t.Fatalf("engine consume %s: exit %d after SIGTERM: %s", c.name, code, c.errText())
	}
}

// publisher publishes acked requests on a subject in the background until it has n acks or
// it is stopped; each body is unique.
type publisher struct {
	mu    sync.Mutex
	acked map[string]qpos // body → where it was stored
	sent  map[string]bool // every body sent, acked or not (a request cut by an engine's kill)
	stop  chan struct{}
	done  chan error
}

// startPublisher publishes n messages on subject from workers goroutines (each in order),
// bodies "<tag> <worker> <i>", the worker's name as the key when keyed.
func startPublisher(t *testing.T, url, subject, tag string, workers, n int, keyed bool) *publisher {
	t.Helper()
	// Its own inbox prefix keeps its acks out of a groupTap's _INBOX.>; it rides through an
	// engine restarting its embedded server.
	nc, err := nats.Connect(url, nats.CustomInboxPrefix("_PUB"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p := &publisher{acked: map[string]qpos{}, sent: map[string]bool{}, stop: make(chan struct{}), done: make(chan error, workers)}
	for w := range workers {
		go func() {
			for i := w; i < n; i += workers {
				select {
				case <-p.stop:
					p.done <- nil
					return
				default:
				}
				body := fmt.Sprintf("%s %d %d", tag, w, i)
				hdr := []string{"Nats-Msg-Id", body}
				if keyed {
					hdr = append(hdr, "Rmq-Keys", fmt.Sprintf("%s-w%d", tag, w))
				}
				p.mu.Lock()
				p.sent[body] = true
				p.mu.Unlock()
				a, err := publishOnce(nc, msg(subject, body, hdr...))
				for retry := time.Now().Add(waitTimeout); err != nil && time.Now().Before(retry); { // the engine restarting: the same id again
					select {
					case <-p.stop:
						p.done <- nil
						return
					case <-time.After(50 * time.Millisecond):
					}
					a, err = publishOnce(nc, msg(subject, body, hdr...))
				}
				if err != nil {
					p.done <- fmt.Errorf("publish %q: %w", body, err)
					return
				}
				p.mu.Lock()
				p.acked[body] = qpos{a.QueueID, a.QueueOffset}
				p.mu.Unlock()
			}
			p.done <- nil
		}()
	}
	t.Cleanup(func() { p.halt() })
	return p
}

// publishOnce sends one request and decodes its ack; an error reply is an error.
func publishOnce(nc *nats.Conn, m *nats.Msg) (ack, error) {
	reply, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		return ack{}, err
	}
	var a ack
	if err := json.Unmarshal(reply.Data, &a); err != nil {
		return ack{}, err
	}
	if a.Error != nil || a.Topic == "" {
		return ack{}, fmt.Errorf("refused: %s", reply.Data)
	}
	return a, nil
}

// halt stops the publisher early (idempotent).
func (p *publisher) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
}

// wait waits for every worker to end and returns what was acked.
func (p *publisher) wait(t *testing.T, workers int) map[string]qpos {
	t.Helper()
	var errs []error
	for range workers {
		errs = append(errs, recv(t, "publisher", p.done))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]qpos, len(p.acked))
	for k, v := range p.acked {
		out[k] = v
	}
	return out
}

// count is how many messages were acked so far.
func (p *publisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// wasSent says whether body was sent (acked or not).
func (p *publisher) wasSent(body string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[body]
}

// positions are the places of the acked messages, sorted.
func positions(acked map[string]qpos) []qpos {
	out := make([]qpos, 0, len(acked))
	for _, p := range acked {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].queue != out[j].queue {
			return out[i].queue < out[j].queue
		}
		return out[i].offset < out[j].offset
	})
	return out
}

// groupStatus is `engine groups describe --json`, as far as the tests look at it.
type groupStatus struct {
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Subject     string `json:"subject"`
	Redelivered int64  `json:"redelivered"`
	LagMessages int64  `json:"lagMessages"`
	Members     []struct {
		MemberID string  `json:"memberId"`
		ClientID string  `json:"clientId"`
		Queues   []int32 `json:"queues"`
	} `json:"members"`
	Queues []struct {
		QueueID     int32  `json:"queueId"`
		Owner       string `json:"owner"`
		Epoch       int64  `json:"epoch"`
		Committed   int64  `json:"committed"`
		MinOffset   int64  `json:"minOffset"`
		MaxOffset   int64  `json:"maxOffset"`
		LagMessages int64  `json:"lagMessages"`
		Revoking    bool   `json:"revoking"`
	} `json:"queues"`
	Rebalances []struct {
		Reason      string `json:"reason"`
		MemberID    string `json:"memberId"`
		Moved       int    `json:"moved"`
		Redelivered int64  `json:"redelivered"`
	} `json:"rebalances"`
}

// describe runs `engine groups describe --json` against url.
func describe(t *testing.T, url, group, topic string, extra ...string) groupStatus {
	t.Helper()
	out := mustCLI(t, append([]string{"groups", "describe", group, "--topic", topic, "--json", "--nats", url}, extra...)...)
	var st groupStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("groups describe --json: %q: %v", out, err)
	}
	return st
}

// committed is each queue's committed offset from describe.
func (st groupStatus) committed() map[int32]int64 {
	out := map[int32]int64{}
	for _, q := range st.Queues {
		out[q.QueueID] = q.Committed
	}
	return out
}
