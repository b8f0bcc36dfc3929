// Command stoptime measures how long the engine binary takes to stop (SIGTERM to exit) after
// many subjects it has never seen, each its own topic (--max-topics=-1), so that each adds
// ConsumeQueue files and directories (issue 27, item 11). Each run starts the binary on a fresh
// store, publishes one message on each of --subjects new subjects, waits until the appender has
// stored them all (and, with --settle, until dispatch has built every ConsumeQueue), sends
// SIGTERM and times the exit; with -v it prints the stop's log lines as they come, with the
// milliseconds since the signal.
//
//	go build -o /tmp/engine ./cmd/engine
//	go run ./benchmarks/stoptime --bin /tmp/engine --subjects 20000 --runs 3
//	go run ./benchmarks/stoptime --bin /tmp/engine --subjects 20000 --settle
//	go run ./benchmarks/stoptime --bin /tmp/engine --subjects 20000 -- --dispatch-stop-timeout 1s
//
// Use a real disk for --dir (tmpfs makes every sync free).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	bin := flag.String("bin", "", "the engine binary (go build -o /tmp/engine ./cmd/engine)")
	dir := flag.String("dir", os.TempDir(), "where the runs' stores go (a real disk)")
	subjects := flag.Int("subjects", 20000, "new subjects to publish on, one message each")
	settle := flag.Bool("settle", false, "wait until dispatch has caught up before SIGTERM")
	runs := flag.Int("runs", 1, "runs")
	verbose := flag.Bool("v", false, "print the stop's log lines")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "stoptime: --bin is required")
		os.Exit(2)
	}
	for i := range *runs {
		if err := run(*bin, *dir, *subjects, *settle, *verbose, flag.Args()); err != nil {
			fmt.Fprintf(os.Stderr, "stoptime: run %d: %v\n", i+1, err)
			os.Exit(1)
		}
	}
}

func run(bin, parent string, subjects int, settle, verbose bool, extra []string) error {
	store, err := os.MkdirTemp(parent, "stoptime-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(store)
	natsPort, httpPort := freePort(), freePort()
	if natsPort == 0 || httpPort == 0 {
		return fmt.Errorf("no free port")
	}
	args := append([]string{"run", "--store", filepath.Join(store, "store"), "--log-format", "json", "--max-topics=-1",
		"--listen", fmt.Sprintf("127.0.0.1:%d", natsPort), "--http", fmt.Sprintf("127.0.0.1:%d", httpPort)}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if err := waitLine(lines, "engine running", time.Minute); err != nil {
		return err
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		return err
	}
	start := time.Now()
	for i := range subjects {
		if err := nc.Publish(fmt.Sprintf("dev.%d.temp", i), []byte("21.5")); err != nil {
			return err
		}
		if i%1000 == 999 {
			if err := nc.Flush(); err != nil {
				return err
			}
		}
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	nc.Close()
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	var lag float64
	for deadline := time.Now().Add(10 * time.Minute); ; {
		m, err := metrics(base)
		if err != nil {
			return err
		}
		lag = m["rocketstore_dispatch_lag_bytes"]
		if m["rocketstore_append_records_total"] >= float64(subjects) && (!settle || lag == 0) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not stored (and dispatched) within 10 minutes: %v", m["rocketstore_append_records_total"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	stored := time.Since(start)
	for len(lines) > 0 {
		<-lines
	}
	stop := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	for l := range lines {
		if verbose {
			var f map[string]any
			if json.Unmarshal([]byte(l), &f) == nil {
				delete(f, "time")
				b, _ := json.Marshal(f)
				l = string(b)
			}
			fmt.Printf("  +%6d ms %s\n", time.Since(stop).Milliseconds(), l)
		}
	}
	err = cmd.Wait()
	took := time.Since(stop)
	code := cmd.ProcessState.ExitCode()
	fmt.Printf("subjects %d settle %v extra %q: stored in %v, dispatch lag at SIGTERM %.0f bytes; stop took %v (exit %d)\n",
		subjects, settle, strings.Join(extra, " "), stored.Round(time.Millisecond), lag, took.Round(time.Millisecond), code)
	if code != 0 {
		return fmt.Errorf("exit %d: %v", code, err)
	}
	return nil
}

func waitLine(lines <-chan string, substr string, d time.Duration) error {
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return fmt.Errorf("the engine exited before %q", substr)
			}
			if strings.Contains(l, substr) {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no %q within %v", substr, d)
		}
	}
}

func metrics(base string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// freePort returns a loopback TCP port free now (0 when none could be had).
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
