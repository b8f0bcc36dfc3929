package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docs/ARCHITECTURE.md "Recovery", from outside: the files changed as a crash or a damaged disk
// would leave them, then the engine started on them, and `engine verify`.

// segmentPath is the first CommitLog segment of a store.
func segmentPath(dir string) string { return filepath.Join(dir, "commitlog", "00000000000000000000") }

// patch writes b at offset off of the file at path.
func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryTornTail: after a crash, bytes past the last record (a torn write) are cut: the
// scan stops at the first invalid record, truncates there and zeroes what follows, every acked
// message is kept, and the next message is written where the valid data ended. `engine verify`
// is clean before and after.
func TestRecoveryTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	acked := publishAcked(t, e.url, "torn", []string{"torn.a"}, 5)
	last := acked[len(acked)-1].ack
	waitReadable(t, connect(t, e.url), last)
	size := apiGet(t, connect(t, e.url), last.Topic, last.QueueID, last.QueueOffset, 0)[0]["size"].(float64)
	end := last.CommitLogOffset + int64(size)
	e.kill()
	// What a torn append leaves: the start of a record (a plausible size and magic), then junk.
	patch(t, segmentPath(dir), end, []byte{0, 0, 0, 200, 0xda, 0xa3, 0x20, 0xa7, 1, 2, 3, 4, 5, 6, 7, 8})

	e = e.restart(t)
	r := e.recovered
	if r["clean_exit"] != false || r["end"] != float64(end) || r["cut_bytes"].(float64) <= 0 || r["tail"] == "clean" {
		t.Fatalf("recovery of a torn tail: %v, want the log cut back to %d", r, end)
	}
	next := stored(t, connect(t, e.url), msg("torn.a", "next", "Rmq-Keys", "torn.a"))
	if next.CommitLogOffset != end || next.QueueOffset != last.QueueOffset+1 {
		t.Fatalf("the next message at %+v, want CommitLog offset %d and queue offset %d", next, end, last.QueueOffset+1)
	}
	e.stop()
	checkAcked(t, offline(dir), append(acked, sentMsg{"torn.a", "next", next}))
	if v := runCLI(t, append([]string{"verify", "--store", dir}, sizeArgs...)...); v.code != 0 {
		t.Fatalf("verify after the recovery: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

// damageBody flips a byte of an acked message's body in the CommitLog.
func damageBody(t *testing.T, dir string, s sentMsg) {
	t.Helper()
	f, err := os.ReadFile(segmentPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(f[s.ack.CommitLogOffset:]), s.body)
	if i < 0 {
		t.Fatalf("%q not in its record", s.body)
	}
	at := s.ack.CommitLogOffset + int64(i)
	patch(t, segmentPath(dir), at, []byte{f[at] ^ 0xff})
}

// TestVerifyFindsDamage: `engine verify` checks every record: a flipped byte in an acked
// message's body is a problem (exit 1) that names the record's offset; a healthy store is
// consistent (exit 0); a bad flag is a usage error (exit 2).
func TestVerifyFindsDamage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	acked := publishAcked(t, e.url, "dmg", []string{"dmg.a"}, 5)
	e.stop()
	verify := func() result { return runCLI(t, append([]string{"verify", "--store", dir}, sizeArgs...)...) }
	if v := verify(); v.code != 0 {
		t.Fatalf("verify of a healthy store: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	if v := runCLI(t, "verify", "--store", dir, "--no-such-flag"); v.code != 2 {
		t.Fatalf("verify with a bad flag: exit %d, want 2", v.code)
	}
	damageBody(t, dir, acked[1])
	v := verify()
	if v.code != 1 || !strings.Contains(v.stdout+v.stderr, itoa(acked[1].ack.CommitLogOffset)) {
		t.Fatalf("verify of a damaged record at %d: exit %d, want 1 naming it\n%s%s", acked[1].ack.CommitLogOffset, v.code, v.stdout, v.stderr)
	}
}

// TestRecoveryRefusesDamage: ARCHITECTURE.md "Recovery": valid data that stops below the
// checkpoint's durable offset (which /status shows as offsets.sealed, written again within a
// second of each sync) is damage to sealed data, not a crash: recovery refuses and reports it.
// An acked record whose body byte is flipped after a SIGKILL, once sealed, stops the start
// with the reason instead of being cut with every acked record after it.
func TestRecoveryRefusesDamage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--http", "127.0.0.1:0")
	acked := publishAcked(t, e.url, "dmg", []string{"dmg.a"}, 5)
	last := acked[len(acked)-1].ack.CommitLogOffset
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for { // polling another process: the checkpoint is written within a second of the sync
		code, body := httpGet(t, e.http+"/status")
		var st struct {
			Offsets struct{ Sealed int64 } `json:"offsets"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("/status: %d %s", code, body)
		}
		if st.Offsets.Sealed > last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the acked records (last at %d) are not sealed within %v: %s", last, waitTimeout, body)
		}
		<-tick.C
	}
	e.kill()
	damageBody(t, dir, acked[1])
	p := startProc(t, procOpts{args: runArgs(dir)})
	if l, what := p.waitLogAny("engine running", "engine failed"); what != "engine failed" || l["error"] == "" {
		rec, _, _ := p.findLog(0, "store recovered")
		t.Fatalf("a start on a store whose acked record at %d is damaged: %q (%v), want refused with why", acked[1].ack.CommitLogOffset, what, rec)
	}
	if code := p.wait(); code != 1 {
		t.Fatalf("refused start: exit %d, want 1", code)
	}
}
