//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/tmpfs"
)

// waitHTTP polls url (a child's monitor, from outside) until its status is want, and returns the
// body; the test fails if the child exits or the deadline passes first.
func waitHTTP(t *testing.T, e *engine, url string, want int) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		code, body := getNoFail(url)
		if code == want {
			return body
		}
		select {
		case <-e.exited:
			t.Fatalf("engine exited (code %d) while waiting for %s to answer %d", e.code, url, want)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered %d %q, not %d, for %v", url, code, body, want, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sealed is the durable offset of the last checkpoint written, from /status (offsets.sealed).
func sealed(t *testing.T, e *engine) int64 {
	t.Helper()
	_, body := httpGet(t, e.http+"/status")
	var st struct {
		Offsets struct {
			Sealed int64 `json:"sealed"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status %q: %v", body, err)
	}
	return st.Offsets.Sealed
}

// TestDiskFullZeroFree: issue 27, a disk filled to its last byte, from outside. The engine runs
// on a small tmpfs; a ballast file then takes every free block (statfs: 0 free). Publishing with
// plain nats.go gets acks while the space reserved ahead lasts, then 507 replies; /readyz
// answers 503 saying why; the process stays up and keeps writing its checkpoint (/status
// offsets.sealed reaches the last ack); SIGTERM stops it cleanly and it starts again on the
// still-full disk, refusing writes; once the ballast is gone writes resume. Every acked message
// is then in the store exactly once, at the position its ack gave.
func TestDiskFullZeroFree(t *testing.T) {
	t.Parallel()
	mnt := tmpfs.Mount(t, 8<<20, "engine's TestDiskFullZeroFreeTmpfs and seam tests cover this in process")
	dir := filepath.Join(mnt, "store")
	args := []string{"--http", "127.0.0.1:0", "--cq-flush-interval", "20ms", "--cq-flush-thorough-interval", "50ms"}
	e := startEngine(t, dir, args...)
	subjects := []string{"dev.1.temp", "dev.2.temp", "dev.3.temp"}
	acked := publishAcked(t, e.url, "before", subjects, 20)

	ballast := tmpfs.Fill(t, mnt)
	nc := connect(t, e.url)
	refused, last, why := 0, int64(-1), ""
	for i := 0; refused < 20; i++ {
		if i >= 50_000 {
			t.Fatalf("%d acked and %d refused of %d after the disk filled: want refusals", len(acked), refused, i)
		}
		subj := subjects[i%len(subjects)]
		if i%10 == 9 {
			subj = fmt.Sprintf("full.%d.temp", i) // a new topic: its ConsumeQueue needs a file
		}
		body := fmt.Sprintf("full %s %d", subj, i)
		a, raw := request(t, nc, msg(subj, body, "Nats-Msg-Id", fmt.Sprintf("full-%d", i)))
		switch {
		case a.Error != nil && a.Error.Code == 507:
			if refused++; refused == 1 {
				why = a.Error.Description
			}
		case a.Error != nil || a.Topic == "":
			t.Fatalf("message %d on a full disk: %s, want an ack or 507", i, raw)
		default:
			acked = append(acked, sentMsg{subject: subj, body: body, ack: a})
			last = max(last, a.CommitLogOffset)
		}
	}
	if !strings.Contains(waitHTTP(t, e, e.http+"/readyz", 503), "disk") {
		t.Fatalf("/readyz does not say the disk is full: %q", waitHTTP(t, e, e.http+"/readyz", 503))
	}
	for deadline := time.Now().Add(waitTimeout); ; {
		select {
		case <-e.exited:
			t.Fatalf("engine exited (code %d) on the full disk", e.code)
		default:
		}
		if sealed(t, e) > last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the checkpoint's durable offset stays at %d, below the last ack at %d", sealed(t, e), last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("full disk: %d acked in all, 20 refused (507, the first: %q); checkpoint sealed at %d", len(acked), why, sealed(t, e))

	e.stop() // exit 0 after "stopped cleanly"
	e = e.restart(t)
	waitHTTP(t, e, e.http+"/readyz", 503)
	if a, raw := request(t, connect(t, e.url), msg(subjects[0], "refused after the restart")); a.Error == nil || a.Error.Code != 507 {
		t.Fatalf("a write after a start on the full disk: %s, want 507", raw)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, e, e.http+"/readyz", 200)
	acked = append(acked, publishAcked(t, e.url, "after", append(subjects, "full.9.temp", "new.1.temp"), 20)...)
	e.stop()
	if n := checkAcked(t, offline(dir), acked); n != len(acked) {
		t.Fatalf("the queues hold %d messages, %d were acked: each must be there once", n, len(acked))
	}
}
