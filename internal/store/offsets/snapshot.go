package offsets

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// metaFile is consumerOffsetMeta.json: the engine's details of each offset, by RocketMQ's key
// and queue id.
type metaFile struct {
	Offsets map[string]map[string]metaEntry `json:"offsets"`
}

type metaEntry struct {
	Epoch  int64  `json:"epoch,omitempty"`
	Member string `json:"member,omitempty"`
	Time   int64  `json:"time,omitempty"`
}

// snapshot is a copy of the table for a compaction to write while changes go on.
type snapshot struct {
	save  bool // write the JSON files; false: only start a new journal on the table there
	table meta.ConsumerOffsetFile
	meta  metaFile
}

func (t *Table) snapshotLocked() snapshot {
	if !t.dirty && !t.needCompact {
		return snapshot{}
	}
	s := snapshot{save: true, table: meta.ConsumerOffsetFile{OffsetTable: make(map[string]map[int32]int64, len(t.state))},
		meta: metaFile{Offsets: make(map[string]map[string]metaEntry, len(t.state))}}
	for k, queues := range t.state {
		key := meta.OffsetKey(k.Group, k.Topic)
		offs := make(map[int32]int64, len(queues))
		details := make(map[string]metaEntry, len(queues))
		for q, o := range queues {
			offs[q] = o.Offset
			if o.Epoch != 0 || o.Member != "" || o.Time != 0 {
				details[queueKey(q)] = metaEntry{Epoch: o.Epoch, Member: o.Member, Time: o.Time}
			}
		}
		s.table.OffsetTable[key] = offs
		if len(details) > 0 {
			s.meta.Offsets[key] = details
		}
	}
	return s
}

// loadMeta adds consumerOffsetMeta.json's details to the offsets loaded. The file is the
// engine's own and only informative: a damaged one is logged and left out.
func (t *Table) loadMeta() {
	var m metaFile
	if _, err := meta.Load(t.fs, t.metaPath(), &m); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.log.Warn().Err(err).Msgf("consumer offsets: %s left out (epochs and commit times are shown as unknown)", MetaFileName)
		}
		return
	}
	for k, queues := range m.Offsets {
		key, ok := splitKey(k)
		if !ok {
			continue
		}
		for qs, d := range queues {
			var q int32
			if _, err := fmt.Sscan(qs, &q); err != nil {
				continue
			}
			if o, ok := t.state[key][q]; ok {
				o.Epoch, o.Member, o.Time = d.Epoch, d.Member, d.Time
				t.state[key][q] = o
			}
		}
	}
}

// compact writes s (when it is to be saved) and replaces the journal with a new, empty one that
// extends the table now there. The JSON files go first: a crash before the new journal is in
// place leaves the old journal naming the old table, which is then ignored, while the new table
// holds everything. It returns the new journal, open for appending, and its size.
func (t *Table) compact(old vfs.File, s snapshot) (vfs.File, int64, error) {
	if err := t.fs.MkdirAll(t.dir); err != nil {
		return nil, 0, err
	}
	if s.save {
		if err := meta.Save(t.fs, t.metaPath(), s.meta); err != nil {
			return nil, 0, err
		}
		if err := meta.Save(t.fs, t.tablePath(), s.table); err != nil {
			return nil, 0, err
		}
	}
	base, err := t.tableHash()
	if err != nil {
		return nil, 0, err
	}
	tmp := t.journalPath() + meta.TmpSuffix
	f, err := t.fs.Create(tmp)
	if err != nil {
		return nil, 0, err
	}
	header := appendHeader(nil, base)
	fail := func(err error) (vfs.File, int64, error) {
		_ = f.Close()
		_ = t.fs.Remove(tmp)
		return nil, 0, err
	}
	if _, err := f.Write(header); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := t.fs.Rename(tmp, t.journalPath()); err != nil {
		return fail(err)
	}
	if err := t.fs.SyncDir(t.dir); err != nil {
		// The rename stands; a crash may bring back the old journal, which names the old
		// table and is then ignored.
		return fail(err)
	}
	if old != nil {
		_ = old.Close()
	}
	return f, int64(len(header)), nil
}
