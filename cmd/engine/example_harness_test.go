package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The documented three-server, three-engine example (docs/SCALE-OUT.md, "A three-server
// deployment"), run as a user runs it: bash scripts/cluster-example.sh [replicated], with this
// test binary as the engine (ENGINE), on ports of its own (PORT_OFFSET) and in a directory of its
// own (DIR). Publishers and readers speak only the documented wire protocol: plain nats.go, JSON
// decoded here, and the engines' HTTP monitoring.

// examplePartitions is the example's partition count.
const examplePartitions = 64

// example is one run of scripts/cluster-example.sh.
type example struct {
	t   *testing.T
	cmd *exec.Cmd
	dir string
	off int

	mu     sync.Mutex
	lines  [4][]map[string]any // by engine (1..3), its JSON log lines so far
	raw    []string
	notify chan struct{} // a value after each new line (capacity 1)
	exited chan struct{} // closed once the script has exited and its output is read
	code   int           // its exit code, set before exited is closed
}

// exampleOffset picks a PORT_OFFSET at which the example's nine ports are free (below Linux's
// ephemeral range, as nats-server's own tests pick theirs).
func exampleOffset(t *testing.T) int {
	t.Helper()
	for range 200 {
		off := 1000 + rand.IntN(19000)
		free := true
		for _, base := range []int{4222, 6222, 8222} {
			for i := range 3 {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off+i))
				if err != nil {
					free = false
					break
				}
				ln.Close()
			}
		}
		if free {
			return off
		}
	}
	t.Fatal("no free port offset for the example")
	return 0
}

// startExample runs the script in mode ("" for its default, single-copy).
func startExample(t *testing.T, mode string) *example {
	t.Helper()
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	x := &example{t: t, dir: t.TempDir(), off: exampleOffset(t), notify: make(chan struct{}, 1), exited: make(chan struct{})}
	args := []string{"scripts/cluster-example.sh"}
	if mode != "" {
		args = append(args, mode)
	}
	x.cmd = exec.Command("bash", args...)
	x.cmd.Dir = filepath.Join("..", "..")
	x.cmd.Env = append(os.Environ(), "ENGINE="+self, childEnv+"=1", "GORACE=atexit_sleep_ms=0",
		"DIR="+x.dir, "PORT_OFFSET="+strconv.Itoa(x.off), "ENGINE_LOG_FORMAT=json", "ENGINE_LOG_LEVEL=info")
	out, err := x.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	x.cmd.Stderr = x.cmd.Stdout
	if err := x.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go x.read(out)
	t.Cleanup(func() {
		select {
		case <-x.exited:
		default:
			_ = x.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-x.exited:
			case <-time.After(waitTimeout):
				for i := 1; i <= 3; i++ {
					x.kill(i)
				}
				_ = x.cmd.Process.Kill()
				<-x.exited
			}
		}
		if t.Failed() {
			t.Logf("cluster-example.sh %s output:\n%s", mode, x.output())
		}
	})
	return x
}

// read collects the script's output: "e<i>: <engine i's JSON log line>" lines, and its own.
func (x *example) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		x.mu.Lock()
		x.raw = append(x.raw, line)
		if len(line) > 4 && line[0] == 'e' && line[2] == ':' && '1' <= line[1] && line[1] <= '3' {
			var m map[string]any
			if json.Unmarshal([]byte(line[4:]), &m) != nil {
				m = map[string]any{"message": line[4:]}
			}
			i := int(line[1] - '0')
			x.lines[i] = append(x.lines[i], m)
		}
		x.mu.Unlock()
		select {
		case x.notify <- struct{}{}:
		default:
		}
	}
	_, _ = io.Copy(io.Discard, out)
	_ = x.cmd.Wait()
	x.code = x.cmd.ProcessState.ExitCode()
	close(x.exited)
}

func (x *example) output() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return strings.Join(x.raw, "\n")
}

// find returns engine i's first log line whose message starts with prefix.
func (x *example) find(i int, prefix string) map[string]any {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, l := range x.lines[i] {
		if msg, _ := l["message"].(string); strings.HasPrefix(msg, prefix) {
			return l
		}
	}
	return nil
}

// waitLog waits until engine i logs a line whose message starts with prefix; the script's exit
// fails the test.
func (x *example) waitLog(i int, prefix string) map[string]any {
	x.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		if l := x.find(i, prefix); l != nil {
			return l
		}
		select {
		case <-x.notify:
		case <-x.exited:
			if l := x.find(i, prefix); l != nil {
				return l
			}
			x.t.Fatalf("the example exited (code %d) before engine %d logged %q", x.code, i, prefix)
		case <-deadline.C:
			x.t.Fatalf("engine %d did not log %q within %v", i, prefix, waitTimeout)
		}
	}
}

// stop sends the script SIGTERM (as Ctrl-C does) and returns its exit code.
func (x *example) stop() int {
	x.t.Helper()
	if err := x.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		x.t.Fatal(err)
	}
	select {
	case <-x.exited:
		return x.code
	case <-time.After(waitTimeout):
		x.t.Fatalf("the example still runs %v after SIGTERM", waitTimeout)
		return 0
	}
}

// kill SIGKILLs engine i (its process id from the script's pid file).
func (x *example) kill(i int) {
	b, err := os.ReadFile(filepath.Join(x.dir, fmt.Sprintf("e%d.pid", i)))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func (x *example) clientURL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", 4221+x.off+i) }
func (x *example) httpURL(i int) string   { return fmt.Sprintf("http://127.0.0.1:%d", 8221+x.off+i) }

var httpClient = &http.Client{Timeout: 5 * time.Second}

// httpGet returns the status code and body of GET url (code 0: no answer).
func httpGet(url string) (int, string) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitAllReady polls the engines' /readyz (outside processes: nothing to wait on but their
// answers) until each answers 200, and returns, by engine, the different not-ready answers seen
// before ("code body").
func (x *example) waitAllReady() [3][]string {
	x.t.Helper()
	var seen [3][]string
	var ready [3]bool
	deadline := time.Now().Add(waitTimeout)
	for {
		all := true
		for i := range 3 {
			if ready[i] {
				continue
			}
			code, body := httpGet(x.httpURL(i+1) + "/readyz")
			ready[i] = code == http.StatusOK
			all = all && ready[i]
			if answer := fmt.Sprint(code, " ", body); !ready[i] && code != 0 && !slices.Contains(seen[i], answer) {
				seen[i] = append(seen[i], answer)
			}
			if !ready[i] && time.Now().After(deadline) {
				x.t.Fatalf("engine %d not ready within %v: %d %s", i+1, waitTimeout, code, body)
			}
		}
		if all {
			return seen
		}
		select {
		case <-x.exited:
			x.t.Fatalf("the example exited (code %d) before every engine was ready (%v)", x.code, seen)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exampleStatus is what these tests read of an engine's /status.
type exampleStatus struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
	NATS   struct {
		Partitions struct {
			Owned   []int             `json:"owned"`
			Mode    string            `json:"mode"`
			Floors  map[string]uint64 `json:"floors"`
			Taken   []int             `json:"taken"`
			Engines []string          `json:"engines"`
		} `json:"partitions"`
	} `json:"nats"`
}

func (x *example) status(i int) exampleStatus {
	x.t.Helper()
	code, body := httpGet(x.httpURL(i) + "/status")
	var st exampleStatus
	if code != http.StatusOK {
		x.t.Fatalf("engine %d /status: %d %s", i, code, body)
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		x.t.Fatalf("engine %d /status: %v", i, err)
	}
	return st
}

// partitionKeys are a key of each partition: FNV-1a (32 bits) of the key mod P, as nats-server's
// {{partition(P,1)}} mapping computes it (docs/SCALE-OUT.md).
func partitionKeys(p int) []string {
	keys := make([]string, p)
	found := 0
	for n := 0; found < p; n++ {
		key := "k" + strconv.Itoa(n)
		h := fnv.New32a()
		h.Write([]byte(key))
		if part := int(h.Sum32() % uint32(p)); keys[part] == "" {
			keys[part] = key
			found++
		}
	}
	return keys
}

// wireMessage is a message of a get reply, as the read API's JSON has it.
type wireMessage struct {
	QueueID     int               `json:"queueId"`
	QueueOffset int64             `json:"queueOffset"`
	UniqKey     string            `json:"uniqKey"`
	Body        []byte            `json:"body"`
	Properties  map[string]string `json:"properties"`
}

// wireGet is a get reply, or an error reply.
type wireGet struct {
	Status   string        `json:"status"`
	Messages []wireMessage `json:"messages"`
	Error    *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

func getRequest(p int) []byte {
	return fmt.Appendf(nil, `{"topic":"orders","queueId":%d,"offset":0,"max":100}`, p)
}
