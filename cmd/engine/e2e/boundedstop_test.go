package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMBoundedWithDispatchBacklog: issue 19, "Stop is bounded". Plain publishes on 4,000
// subjects never seen before leave dispatch far behind (each new topic's ConsumeQueue files are
// made on the dispatch path); SIGTERM then ends the process within 10 s whatever dispatch still
// has to do, /readyz says what is left while it stops, and the next start dispatches the rest:
// every subject's message is then in its queue. docs/CONFIG.md, dispatch_stop_timeout.
func TestSIGTERMBoundedWithDispatchBacklog(t *testing.T) {
	t.Parallel()
	const subjects = 4000
	dir := t.TempDir()
	// A topic per subject (no limit): each new topic costs dispatch a directory and files, which
	// makes the backlog.
	e := startEngine(t, dir, "--http", "127.0.0.1:0", "--dispatch-stop-timeout", "2s", "--max-topics=-1")
	nc := connect(t, e.url)
	for i := range subjects {
		if err := nc.Publish(fmt.Sprintf("dev.%d.temp", i), []byte("21.5")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitTimeout); ; { // counters are all there is to wait on from outside
		m := scrapeMetrics(t, e.http)
		if got := m["rocketstore_append_records_total"]; got == subjects {
			t.Logf("all %d stored, %v bytes not dispatched yet", subjects, m["rocketstore_dispatch_lag_bytes"])
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%v of %d stored within %v", got, subjects, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	e.send(syscall.SIGTERM)
	var readyz string
	for time.Since(start) < 10*time.Second {
		code, body := getNoFail(e.http + "/readyz")
		if code == 0 {
			break // the monitor has closed: the process is exiting
		}
		if strings.Contains(body, "dispatch backlog") {
			readyz = strings.TrimSpace(body)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := e.wait(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	took := time.Since(start)
	t.Logf("stopped in %v; /readyz while stopping: %q", took, readyz)
	if took >= 10*time.Second {
		t.Fatalf("SIGTERM took %v, want under 10 s", took)
	}
	if _, _, ok := e.findLog(0, "stopped before dispatch caught up"); ok && readyz == "" {
		t.Error("dispatch was cut short, but /readyz never said what was left")
	}

	e = e.restart(t)
	e.stop()
	if got := len(ndjson(t, mustCLI(t, append([]string{"topics", "--json"}, offline(dir)...)...))); got != subjects {
		t.Fatalf("%d topics after the restart, want %d", got, subjects)
	}
	for _, i := range []int{0, subjects / 2, subjects - 1} {
		if n := storedCount(t, dir, fmt.Sprintf("dev_%d_temp", i)); n != 1 {
			t.Fatalf("dev.%d.temp: %d messages after the restart, want 1", i, n)
		}
	}
}

// TestSIGTERMSaysWhatItWaitsOn: issue 27, a stop after many new topics. With 20,000 subjects
// never seen before (a topic each, --max-topics=-1) dispatch is far behind when SIGTERM comes: the
// log says at once what the stop waits on (the stages still running, the bytes dispatch has
// left), the stop cuts dispatch at --dispatch-stop-timeout and says so, and it ends with the
// time it took; the exit is clean. (That the stop's work no longer grows with the number of new
// ConsumeQueue files is the engine's TestStopSyncsDoNotGrowWithNewTopics, counted through the
// vfs seam; a test from outside cannot count syncs without timing them.)
func TestSIGTERMSaysWhatItWaitsOn(t *testing.T) {
	t.Parallel()
	const subjects = 20000
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--dispatch-stop-timeout", "1s", "--max-topics=-1")
	nc := connect(t, e.url)
	for i := range subjects {
		if err := nc.Publish(fmt.Sprintf("dev.%d.temp", i), []byte("21.5")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitTimeout); ; { // counters are all there is to wait on from outside
		m := scrapeMetrics(t, e.http)
		if m["rocketstore_append_records_total"] == subjects {
			if m["rocketstore_dispatch_lag_bytes"] == 0 {
				t.Skip("dispatch caught up with 20,000 new topics before the stop: nothing to wait on")
			}
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%v of %d stored within %v", m["rocketstore_append_records_total"], subjects, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.stop()
	first := e.waitLog("stopping: waiting for the pipeline to drain")
	stages, _ := first["stages"].([]any)
	hasDispatch := false
	for _, s := range stages {
		hasDispatch = hasDispatch || s == "dispatch"
	}
	if left, _ := first["not_dispatched_bytes"].(float64); !hasDispatch || left <= 0 || first["waiting_on"] == "" {
		t.Fatalf("the first line of the stop: %v; want the stages (dispatch among them) and the bytes dispatch has left", first)
	}
	cut := e.waitLog("stopped before dispatch caught up")
	closed := e.waitLog("store closed")
	t.Logf("stop: %v; %v; %v", first["waiting_on"], cut["not_dispatched_bytes"], closed)
	if _, ok := closed["took"].(float64); !ok {
		t.Fatalf("store closed without the time it took: %v", closed)
	}
}
