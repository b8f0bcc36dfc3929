package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// verifyEngineStore is Verify for the engine targets: once the engine closed, it reads the store
// back, read-only, two ways, and each must hold exactly what the publishers sent.
//
//   - The CommitLog: every segment scanned from its start, every record checked (structure,
//     BODYCRC, the whole-record __CRC32# property), every body counted.
//   - The ConsumeQueues: every unit of every queue, read from the files, must name a record
//     of its topic and queue with its queue offset and size; the bodies they name are counted.
//
// It also fails the run on what the engine itself reported: drops, append errors, error replies.
// What the target preloaded before the measurement is taken out of both tallies.
func verifyEngineStore(ctx context.Context, in VerifyInput) (Tally, []string) {
	var problems []string
	if er := in.Target.Engine; er == nil {
		problems = append(problems, "the engine target reported no stats")
	} else {
		if er.Dropped > 0 && !in.Run.TolerateDrops {
			problems = append(problems, fmt.Sprintf("nats.go dropped %d messages (slow consumer)", er.Dropped))
		}
		if er.AppendErrors > 0 || er.ErrorReplies > 0 || er.ReplyFailures > 0 {
			problems = append(problems, fmt.Sprintf("append errors %d, error replies %d, failed replies %d",
				er.AppendErrors, er.ErrorReplies, er.ReplyFailures))
		}
		if er.Duplicates > 0 {
			problems = append(problems, fmt.Sprintf("%d duplicates answered from the dedupe window", er.Duplicates))
		}
	}
	if in.Run.TolerateDrops {
		return verifyStoreWithDrops(ctx, in, problems)
	}
	st, err := readStore(ctx, storeDir(in.Dir), in.Run.Target.CommitLogSize)
	st.CommitLog, st.Queues = in.preloadedOut(st.CommitLog), in.preloadedOut(st.Queues)
	if err != nil {
		return st.CommitLog, append(problems, "reading the store back: "+err.Error())
	}
	if d := in.Sent.Diff(st.CommitLog); d != "" {
		problems = append(problems, "commitlog: "+d)
	}
	if d := in.Sent.Diff(st.Queues); d != "" {
		problems = append(problems, "consumequeues: "+d)
	}
	return st.CommitLog, problems
}

// StoreTally is what readStore found: the bodies of the CommitLog's records, and the bodies the
// ConsumeQueue units name.
type StoreTally struct {
	CommitLog Tally
	Queues    Tally
}

// readStore reads a closed store in dir; see verifyEngineStore. It changes nothing on disk.
func readStore(ctx context.Context, dir string, segSize int64) (StoreTally, error) {
	return readStoreWith(ctx, dir, segSize, nil)
}

// readStoreWith is readStore that also hands each, when set, the body of every CommitLog record.
func readStoreWith(ctx context.Context, dir string, segSize int64, each func(body []byte)) (StoreTally, error) {
	var st StoreTally
	if segSize == 0 {
		segSize = commitlog.DefaultFileSize
	}
	log, err := commitlog.OpenLog(commitlog.LogOptions{
		FS: vfs.Default, Dir: filepath.Join(dir, "commitlog"), FileSize: segSize, ReadOnly: true,
	})
	if err != nil {
		return st, err
	}
	defer log.Close()
	if st.CommitLog, err = scanLog(ctx, log, each); err != nil {
		return st, err
	}
	st.Queues, err = readQueues(ctx, filepath.Join(dir, "consumequeue"), log)
	return st, err
}

// scanLog counts the body of every record of every segment (and hands it to each, when set),
// with every check the store format has; the log must end cleanly (zeros), with nothing after
// its end.
func scanLog(ctx context.Context, log *commitlog.Log, each func([]byte)) (Tally, error) {
	var t Tally
	chk := commitlog.Check{RequirePropCRC: true}
	ended := ""
	for _, f := range log.Queue().Files() {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		if !f.Acquire() {
			return t, fmt.Errorf("commitlog segment %s: %w", f.Name(), segment.ErrDeleted)
		}
		end, tail, err := commitlog.Scan(f.Data()[:f.Size()], 0, chk, func(_ int, v commitlog.View) error {
			t.Add(v.Body())
			if each != nil {
				each(v.Body())
			}
			return nil
		})
		if rerr := f.Release(); err == nil {
			err = rerr
		}
		switch {
		case err != nil:
			return t, fmt.Errorf("commitlog segment %s at %d (%s): %w", f.Name(), end, tail, err)
		case ended != "" && end > 0:
			return t, fmt.Errorf("commitlog: records in %s after the log ended in %s", f.Name(), ended)
		case tail == commitlog.TailClean:
			ended = f.Name()
		}
	}
	return t, nil
}

// readQueues reads every ConsumeQueue file under root straight from disk, decodes its units and
// checks each against the record it names; it counts those records' bodies.
func readQueues(ctx context.Context, root string, log *commitlog.Log) (Tally, error) {
	var t Tally
	topics, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	} else if err != nil {
		return t, err
	}
	for _, topic := range topics {
		ids, err := os.ReadDir(filepath.Join(root, topic.Name()))
		if err != nil {
			return t, err
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return t, err
			}
			qid, err := strconv.ParseInt(id.Name(), 10, 32)
			if err != nil {
				return t, fmt.Errorf("consumequeue %s/%s: not a queue id", topic.Name(), id.Name())
			}
			q := queueRef{topic: topic.Name(), id: int32(qid), dir: filepath.Join(root, topic.Name(), id.Name())}
			if err := q.read(log, &t); err != nil {
				return t, err
			}
		}
	}
	return t, nil
}

// queueRef is one ConsumeQueue directory.
type queueRef struct {
	topic string
	id    int32
	dir   string
}

// String names the queue in errors.
func (q queueRef) String() string { return fmt.Sprintf("consumequeue %s/%d", q.topic, q.id) }

// read walks the queue's files in offset order. Its units run from the first file's start to
// the first unit that is not valid (zeros: never written); nothing may follow that.
func (q queueRef) read(log *commitlog.Log, t *Tally) error {
	ents, err := os.ReadDir(q.dir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if _, ok := segment.ParseName(e.Name()); ok && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // fixed-width decimal names: lexical order is offset order
	ended := false
	next := int64(-1)
	buf := make([]byte, queueReadChunk)
	for _, name := range names {
		base, _ := segment.ParseName(name)
		if next >= 0 && base != next {
			return fmt.Errorf("%s: file %s does not follow the previous one (want base %d)", q, name, next)
		}
		size, err := q.readFile(filepath.Join(q.dir, name), buf, func(pos int64, u consumequeue.Unit) error {
			n := (base + pos) / consumequeue.UnitSize
			switch {
			case u.IsBlank():
				return nil
			case !u.Valid():
				ended = true
				return nil
			case ended:
				return fmt.Errorf("%s: unit at queue offset %d after the queue's end", q, n)
			}
			return q.check(log, n, u, t)
		})
		if err != nil {
			return err
		}
		next = base + size
	}
	return nil
}

// queueReadChunk is how much of a ConsumeQueue file is read at a time.
const queueReadChunk = 64 << 10

// readFile calls fn with every unit of a ConsumeQueue file that holds data and returns the
// file's size. A file is mostly never written (6 MB, reserved on disk in small steps as it
// fills), so it is read in chunks up to its first zero unit, and past that only where the file
// system says there is data (SEEK_DATA): at 10,000 topics a store has 40,000 such files, which
// would be 240 GB read in full. Where SEEK_DATA is not supported the whole file is read.
func (q queueRef) readFile(name string, buf []byte, fn func(pos int64, u consumequeue.Unit) error) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	pos := int64(0)
	seek := false // past the first zero unit: jump over holes
	for pos < size {
		if seek {
			d, err := f.Seek(pos, unix.SEEK_DATA)
			if err != nil { // ENXIO: no data after pos; or no SEEK_DATA (then read on)
				if errors.Is(err, syscall.ENXIO) {
					break
				}
				seek = false
			} else {
				pos = d - d%consumequeue.UnitSize
			}
		}
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		if n == 0 && err != nil {
			return size, fmt.Errorf("%s at %d: %w", name, pos, err)
		}
		n -= n % consumequeue.UnitSize
		if n == 0 {
			return size, fmt.Errorf("%s at %d: short read", name, pos)
		}
		for off := 0; off < n; off += consumequeue.UnitSize {
			u := consumequeue.DecodeUnit(buf[off:])
			if !seek && !u.Valid() && !u.IsBlank() {
				seek = true
			}
			if err := fn(pos+int64(off), u); err != nil {
				return size, err
			}
		}
		pos += int64(n)
	}
	return size, nil
}

// check reads the record unit n names and counts its body.
func (q queueRef) check(log *commitlog.Log, n int64, u consumequeue.Unit, t *Tally) error {
	v, release, err := log.Read(u.Phys)
	if err != nil {
		return fmt.Errorf("%s: unit %d: %w", q, n, err)
	}
	defer release()
	switch {
	case v.TotalSize() != int(u.Size):
		return fmt.Errorf("%s: unit %d says %d bytes, the record at %d has %d", q, n, u.Size, u.Phys, v.TotalSize())
	case v.QueueID() != q.id || string(v.Topic()) != q.topic:
		return fmt.Errorf("%s: unit %d names a record of %s/%d", q, n, v.Topic(), v.QueueID())
	case v.QueueOffset() != n:
		return fmt.Errorf("%s: unit %d names a record with queue offset %d", q, n, v.QueueOffset())
	}
	t.Add(v.Body())
	return nil
}
