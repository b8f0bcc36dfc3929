package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

func init() {
	register(&Scenario{
		Name: "disk-ceiling",
		Doc: "no NATS: one file in the scratch directory, appended in batches of the body size (1 MiB in the presets), " +
			"each written and fdatasync'ed before the next: the disk's sequential write+sync bandwidth",
		Modes:      []AckMode{FireAndForget},
		SelfLoaded: true,
		New: func(cfg TargetConfig, log zerolog.Logger) (Target, error) {
			return &diskTarget{cfg: cfg, log: log}, nil
		},
		Verify: verifyDiskFile,
	})
}

// diskFile is the disk ceiling's file inside the run's directory.
func diskFile(runDir string) string { return filepath.Join(runDir, "disk", "sequential.dat") }

// diskTarget measures the disk, not a server: Await appends batches of Load.BodySize bytes to
// one file, write(2) then fdatasync(2) each, until Load.Messages batches or Load.Duration. Each
// batch is a benchmark body (sequence number and filler), so that verification can read the
// file back like any store.
type diskTarget struct {
	cfg TargetConfig
	log zerolog.Logger

	f     *os.File
	gen   Tally
	start time.Time
	syncs int64
}

// selfLoadedURL is what a self-loaded target reports instead of a URL: no publisher connects.
const selfLoadedURL = "none: self-loaded"

// Start creates the file; there is no URL: no publisher runs.
func (t *diskTarget) Start(context.Context) (string, error) {
	name := diskFile(t.cfg.Dir)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return "", err
	}
	var err error
	t.f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	return selfLoadedURL, err
}

// Await runs the load: batches written and synced one after another. n is ignored (the
// runner sends 0: the load is the target's own).
func (t *diskTarget) Await(ctx context.Context, _ int64, _ time.Duration) (time.Time, error) {
	l := t.cfg.Run.Load
	batch := newBody(l.BodySize, genPub)
	t.start = time.Now()
	var deadline time.Time
	if l.Duration > 0 {
		deadline = t.start.Add(l.Duration)
	}
	for i := int64(0); l.Messages <= 0 || i < l.Messages; i++ {
		if stop(ctx, deadline) {
			break
		}
		setSeq(batch, seqOf(genPub, i))
		t.gen.Add(batch)
		if i+1 == t.cfg.Run.Fault.TargetDrop {
			continue // the deliberate loss: counted, not written
		}
		if _, err := t.f.Write(batch); err != nil {
			return time.Time{}, err
		}
		if err := unix.Fdatasync(int(t.f.Fd())); err != nil {
			return time.Time{}, fmt.Errorf("fdatasync: %w", err)
		}
		t.syncs++
	}
	return time.Now(), ctx.Err()
}

// Stop closes the file.
func (t *diskTarget) Stop() error {
	if t.f == nil {
		return nil
	}
	return t.f.Close()
}

// Report is what the target wrote, from when it started.
func (t *diskTarget) Report() TargetReport {
	g := t.gen
	return TargetReport{Generated: &g, Start: t.start.UnixNano(), Syncs: t.syncs, Synced: t.syncs}
}

// verifyDiskFile reads the file back in batches: they must tally to what the target wrote.
func verifyDiskFile(ctx context.Context, in VerifyInput) (Tally, []string) {
	var t Tally
	f, err := os.Open(diskFile(in.Dir))
	if err != nil {
		return t, []string{err.Error()}
	}
	defer f.Close()
	buf := make([]byte, in.Run.Load.BodySize)
	for {
		if err := ctx.Err(); err != nil {
			return t, []string{err.Error()}
		}
		_, err := io.ReadFull(f, buf)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return t, []string{fmt.Sprintf("after %d batches: %v", t.Count, err)}
		}
		t.Add(buf)
	}
	if d := in.Sent.Diff(t); d != "" {
		return t, []string{"file: " + d}
	}
	return t, nil
}
