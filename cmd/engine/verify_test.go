package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/verify"
)

// Sizes of the stores these tests write, passed to verify as to run.
const (
	vSegment = 64 << 10
	vUnits   = 64
	vSlots   = 64
	vEntries = 512
)

func verifyFlags(dir string) checkFlags {
	return checkFlags{
		Store: dir, MaxProblems: 100,
		CommitLogSize: vSegment, CQUnits: vUnits, IndexSlots: vSlots, IndexEntries: vEntries,
	}
}

func sizeArgs(dir string) []string {
	return []string{"--store", dir, "--commit-log-size", fmt.Sprint(vSegment), "--cq-units", fmt.Sprint(vUnits),
		"--index-slots", fmt.Sprint(vSlots), "--index-entries", fmt.Sprint(vEntries)}
}

func engineOpts(t testing.TB, dir string) engine.Options {
	return engine.Options{
		Dir: dir, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		CommitLogFileSize: vSegment, ConsumeQueueUnits: vUnits, IndexSlots: vSlots, IndexEntries: vEntries,
	}
}

// writeStore writes n messages through the engine into dir (on disk) and closes it.
func writeStore(t testing.TB, dir string, n int) {
	t.Helper()
	e, err := engine.Open(engineOpts(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []engine.Message
	for i := range n {
		msgs = append(msgs, engine.Message{
			Topic: fmt.Sprintf("orders-%d", i%2), QueueID: int32(i % 3), Body: bytes.Repeat([]byte{'m'}, 50+i%300),
			Tags: "created", Keys: []string{fmt.Sprintf("order-%d", i)}, MsgID: fmt.Sprintf("msg-%06d", i),
		})
	}
	res, err := e.Put(context.Background(), msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// breakUnit overwrites the tags code of unit 3 of orders-0/0.
func breakUnit(t testing.TB, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "consumequeue", "orders-0", "0", fmt.Sprintf("%020d", 0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{0xEE}, 3*consumequeue.UnitSize+consumequeue.TagsCodeOffset+7); err != nil {
		t.Fatal(err)
	}
}

func execute(t testing.TB, f checkFlags, repair bool) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code, err := f.execute(context.Background(), &stdout, &stderr, false, repair)
	if err != nil {
		t.Fatalf("execute: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return code, stdout.String(), stderr.String()
}

func TestVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 400)
	f := verifyFlags(dir)

	code, out, _ := execute(t, f, false)
	if code != exitConsistent || !strings.Contains(out, "verdict: consistent") {
		t.Fatalf("clean store: exit %d\n%s", code, out)
	}
	f.JSON = true
	code, out, _ = execute(t, f, false)
	var rep verify.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if code != exitConsistent || rep.Verdict != verify.VerdictConsistent || rep.CommitLog.Records != 400 || rep.ConsumeQueue.Units != 400 || len(rep.Problems) != 0 {
		t.Fatalf("clean store: exit %d, %+v", code, rep)
	}

	breakUnit(t, dir)
	code, out, _ = execute(t, f, false)
	rep = verify.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || (p.Kind == verify.KindCQUnit && p.Offset == 3*consumequeue.UnitSize &&
			p.File == filepath.Join("consumequeue", "orders-0", "0", fmt.Sprintf("%020d", 0)))
	}
	if code != exitProblems || rep.Verdict != verify.VerdictInconsistent || rep.Counts[verify.KindCQUnit] != 1 || !found {
		t.Fatalf("damaged store: exit %d\n%s", code, out)
	}
	f.JSON = false
	code, out, _ = execute(t, f, false)
	if code != exitProblems || !strings.Contains(out, "cq-unit") || !strings.Contains(out, "to repair: engine repair") {
		t.Fatalf("damaged store, text: exit %d\n%s", code, out)
	}

	// verify --repair: exit 1 (a repair was needed), then the store verifies clean.
	f.JSON = true
	code, out, _ = execute(t, f, true)
	var rr verify.RepairReport
	if err := json.Unmarshal([]byte(out), &rr); err != nil {
		t.Fatalf("--repair --json output: %v\n%s", err, out)
	}
	if code != exitProblems || !rr.Needed || rr.After == nil || !rr.After.Consistent() || len(rr.Queues) != 1 ||
		rr.Queues[0].Queue != "orders-0/0" || !rr.Queues[0].Rebuilt {
		t.Fatalf("repair: exit %d\n%s", code, out)
	}
	code, _, _ = execute(t, f, false)
	if code != exitConsistent {
		t.Fatalf("after repair: exit %d", code)
	}
	code, out, _ = execute(t, f, true)
	if code != exitConsistent || !strings.Contains(out, `"needed": false`) {
		t.Fatalf("repair of a clean store: exit %d\n%s", code, out)
	}
}

func TestVerifyCommandUsage(t *testing.T) {
	code, _, stderr := execute(t, verifyFlags(filepath.Join(t.TempDir(), "nothing")), false)
	if code != exitUsage || !strings.Contains(stderr, "no store") {
		t.Fatalf("missing store: exit %d, %q", code, stderr)
	}
	f := verifyFlags(t.TempDir())
	f.CQUnits = 0
	if code, _, _ := execute(t, f, false); code != exitUsage {
		t.Fatalf("--cq-units 0: exit %d", code)
	}
	f = verifyFlags(t.TempDir())
	f.CommitLogSize = 10
	if code, _, _ := execute(t, f, true); code != exitUsage {
		t.Fatalf("--commit-log-size 10: exit %d", code)
	}
}

// TestRepairCommandRefusesWhileRunning: an engine holds the store; repair must fail with an
// error that says so, and change nothing.
func TestRepairCommandRefusesWhileRunning(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 20)
	e, err := engine.Open(engineOpts(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var stdout, stderr bytes.Buffer
	_, err = verifyFlags(dir).execute(context.Background(), &stdout, &stderr, false, true)
	if !errors.Is(err, verify.ErrNotRepairable) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("repair while an engine runs: %v", err)
	}
}

func TestVerifyProgressBar(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 100)
	var stdout, stderr bytes.Buffer
	code, err := verifyFlags(dir).execute(context.Background(), &stdout, &stderr, true, false)
	if err != nil || code != exitConsistent {
		t.Fatalf("exit %d, %v", code, err)
	}
	for _, phase := range []string{"commitlog", "consumequeue", "index"} {
		if !strings.Contains(stderr.String(), "\r"+phase) || !strings.Contains(stderr.String(), "100%") {
			t.Fatalf("no bar for %s on a terminal: %q", phase, stderr.String())
		}
	}
	stderr.Reset()
	if code, err := verifyFlags(dir).execute(context.Background(), &stdout, &stderr, false, false); err != nil || code != 0 || stderr.Len() != 0 {
		t.Fatalf("not a terminal: exit %d, %v, stderr %q", code, err, stderr.String())
	}
}

// runBinary runs the command in a child process (see TestMain) and returns its exit code and
// output.
func runBinary(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestVerifyExitCodes runs the real binary: the exit codes are what scripts see.
func TestVerifyExitCodes(t *testing.T) {
	dir := t.TempDir()
	writeStore(t, dir, 200)
	if code, out, errOut := runBinary(t, append([]string{"verify", "--json"}, sizeArgs(dir)...)...); code != 0 || !strings.Contains(out, `"verdict": "consistent"`) {
		t.Fatalf("clean store: exit %d\n%s\n%s", code, out, errOut)
	}
	breakUnit(t, dir)
	if code, out, errOut := runBinary(t, append([]string{"verify"}, sizeArgs(dir)...)...); code != 1 || !strings.Contains(out, "verdict: inconsistent") {
		t.Fatalf("damaged store: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runBinary(t, append([]string{"repair"}, sizeArgs(dir)...)...); code != 1 || !strings.Contains(out, "after repair:") {
		t.Fatalf("repair: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runBinary(t, append([]string{"verify", "--repair"}, sizeArgs(dir)...)...); code != 0 || !strings.Contains(out, "nothing to repair") {
		t.Fatalf("repair of a repaired store: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runBinary(t, "verify", "--store", filepath.Join(dir, "nothing")); code != 2 || !strings.Contains(errOut, "no store") {
		t.Fatalf("missing store: exit %d\n%s", code, errOut)
	}
}
