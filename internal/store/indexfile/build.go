package indexfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// Transaction bits of SYSFLAG (commitlog.TxMask, commitlog.TxRollback), repeated here so that
// the index does not depend on the record codec.
const (
	txMask     int32 = 0xC
	txRollback int32 = 0xC
)

// maxNameTries bounds the search for a free file name when names collide.
const maxNameTries = 1000

// Request is what the index needs of one dispatched message (RocketMQ's DispatchRequest).
type Request struct {
	Topic string
	// UniqKey is the UNIQ_KEY property; "" means absent (the broker always sets one).
	UniqKey string
	// Keys is the KEYS property: keys separated by single spaces; empty tokens are skipped.
	Keys string
	// PhyOffset is the message's CommitLog offset.
	PhyOffset int64
	// StoreTimestamp is the message's store timestamp (ms).
	StoreTimestamp int64
	// SysFlag is the record's SYSFLAG; only its transaction bits are looked at, so the
	// transaction type alone (commitlog.View.TransactionType) works as well.
	SysFlag int32
}

// BuildIndex indexes one dispatched message as IndexService.buildIndex does: it makes sure a
// writable last file exists, skips the message if its offset is below that file's endPhyOffset
// (already indexed, e.g. re-dispatched after a restart) or if it is a transaction rollback, then
// puts "topic#UNIQ_KEY" and "topic#key" for each key, rolling to a new file whenever the last one
// is full. A new file starts from the end values of the full one (see CreateFile).
//
// When a file fills up and a new one is started, filled is the full file's endTimestamp (the
// newest such, if several): the caller flushes (Flush) and then stores it as the checkpoint's
// indexMsgTimestamp. Otherwise filled is 0.
//
// On error the message may be partly indexed; calling again puts its keys again (RocketMQ would
// have stopped indexing). Only the writer calls BuildIndex.
func (s *Service) BuildIndex(req Request) (filled int64, err error) {
	f, filled, err := s.writable()
	if err != nil {
		return filled, err
	}
	if req.PhyOffset < f.EndPhyOffset() || req.SysFlag&txMask == txRollback {
		return filled, nil
	}
	prefix := topicPrefixHash(req.Topic)
	put := func(key string) error {
		var err error
		f, filled, err = s.putHash(f, filled, KeyHashFrom(prefix, key), req.PhyOffset, req.StoreTimestamp)
		return err
	}
	if req.UniqKey != "" {
		if err := put(req.UniqKey); err != nil {
			return filled, err
		}
	}
	for keys := req.Keys; keys != ""; {
		var key string
		if i := indexSpace(keys); i >= 0 {
			key, keys = keys[:i], keys[i+1:]
		} else {
			key, keys = keys, ""
		}
		if key == "" {
			continue
		}
		if err := put(key); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// BuildHashes is BuildIndex for a normal (not rolled-back) message whose key hashes the caller
// computed already (KeyHash, KeyHashBytes: the encoder does, off the dispatcher's goroutine):
// the same skip of what is indexed already, the same entries in the same order, the same rolls.
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

// indexSpace is strings.IndexByte(s, ' '), kept local so the hot loop reads plainly.
func indexSpace(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return i
		}
	}
	return -1
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
// directory entry durable: a checkpoint written later must never outlive the file.
func (s *Service) create(prevName string, prevPhy, prevTS int64) (*File, error) {
	name := nextName(s.opts.Now(), s.opts.Location, prevName)
	for try := 0; ; try++ {
		f, err := CreateFile(s.opts.FS, path.Join(s.opts.Dir, name), s.opts.Geometry, s.step, prevPhy, prevTS)
		if err == nil {
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
