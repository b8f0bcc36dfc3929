package indexfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// maxNameTries bounds the search for a free file name when names collide.
const maxNameTries = 1000

// BuildHashes indexes one dispatched message as IndexService.buildIndex does, given the hashes of
// its keys in the order they go in ("topic#UNIQ_KEY", then "topic#key" for each key: which keys a
// message has, and whether it is indexed at all, is the caller's, package derive). It makes sure
// a writable last file exists, skips the message if its offset is below that file's endPhyOffset
// (already indexed, e.g. re-dispatched after a restart), then puts each hash, rolling to a new
// file whenever the last one is full. A new file starts from the end values of the full one (see
// CreateFile).
//
// When a file fills up and a new one is started, filled is the full file's endTimestamp (the
// newest such, if several): the caller flushes (Flush) and then stores it as the checkpoint's
// indexMsgTimestamp. Otherwise filled is 0.
//
// On error the message may be partly indexed; calling again puts its keys again (RocketMQ would
// have stopped indexing). Only the writer calls BuildHashes.
func (s *Service) BuildHashes(phyOffset, storeTimestamp int64, hashes []int32) (filled int64, err error) {
	f, filled, err := s.writable()
	if err != nil {
		return filled, err
	}
	if phyOffset < f.EndPhyOffset() {
		return filled, nil
	}
	for _, h := range hashes {
		if f, filled, err = s.putHash(f, filled, h, phyOffset, storeTimestamp); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// putHash puts one key hash into f, rolling to a new file while f is full; it returns the file
// written and the newest filled timestamp.
func (s *Service) putHash(f *File, filled int64, h int32, phyOffset, storeTimestamp int64) (*File, int64, error) {
	for {
		err := f.PutHash(h, phyOffset, storeTimestamp)
		if !errors.Is(err, ErrFull) {
			return f, filled, err
		}
		var ts int64
		if f, ts, err = s.writable(); err != nil {
			return f, filled, err
		}
		filled = max(filled, ts)
	}
}

// writable returns the last file, creating one when there is none or the last is full
// (IndexService.getAndCreateLastIndexFile). filled is the full file's endTimestamp when it rolled.
func (s *Service) writable() (f *File, filled int64, err error) {
	if s.opts.ReadOnly {
		return nil, 0, ErrReadOnly
	}
	s.mu.RLock()
	closed := s.closed
	var last *File
	if n := len(s.files); n > 0 {
		last = s.files[n-1]
	}
	s.mu.RUnlock()
	switch {
	case closed:
		return nil, 0, ErrClosed
	case last != nil && !last.Full():
		return last, 0, nil
	}
	var (
		prevPhy, prevTS int64
		prevName        string
	)
	if last != nil {
		// The full file is durable, header and slots included, before the next one exists:
		// recovery repairs only the newest file's unflushed part (RelinkLast), so a crash must
		// never keep a newer file after one whose slot page reached the disk without its header.
		if err := last.Flush(); err != nil {
			return nil, 0, err
		}
		prevPhy, prevTS, filled = last.EndPhyOffset(), last.EndTimestamp(), last.EndTimestamp()
		prevName = path.Base(last.Name())
	}
	nf, err := s.create(prevName, prevPhy, prevTS)
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, errors.Join(ErrClosed, nf.Close())
	}
	s.files = append(s.files, nf)
	s.mu.Unlock()
	return nf, filled, nil
}

// create makes the next file, named by the clock but always after prevName, and makes its
// header and its directory entry durable: a checkpoint written later must never outlive the
// file, and a crash must never keep the file without the end values it inherits, with which the
// writer skips what the previous file indexed (without them it would index it all again, out
// of CommitLog order).
func (s *Service) create(prevName string, prevPhy, prevTS int64) (*File, error) {
	name := nextName(s.opts.Now(), s.opts.Location, prevName)
	for try := 0; ; try++ {
		f, err := CreateFile(s.opts.FS, path.Join(s.opts.Dir, name), s.opts.Geometry, s.step, prevPhy, prevTS)
		if err == nil {
			if err := f.Flush(); err != nil {
				return nil, errors.Join(err, f.Close(), s.opts.FS.Remove(f.Name()))
			}
			if err := s.opts.FS.SyncDir(s.opts.Dir); err != nil {
				return nil, errors.Join(err, f.Close(), s.opts.FS.Remove(f.Name()))
			}
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) || try >= maxNameTries {
			return nil, fmt.Errorf("indexfile: new file in %s: %w", s.opts.Dir, err)
		}
		name = afterName(name) // a stray file holds the name: take the next millisecond
	}
}
