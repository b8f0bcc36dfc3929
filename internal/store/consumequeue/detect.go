package consumequeue

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// DetectUnitsPerFile is the number of units per file the ConsumeQueues under root were written
// with, read from the size of their files (RocketMQ's mappedFileSizeConsumeQueue / 20). Every
// queue of a store has files of one size, so the first queue (by topic, then queue id) that
// has a file tells; a queue whose files have another size fails when it is opened with this
// one. ok is false when no queue has a file yet.
func DetectUnitsPerFile(fsys vfs.FS, root string) (units int, ok bool, err error) {
	dir := filepath.Join(root, "consumequeue")
	topics, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("consumequeue: %w", err)
	}
	for _, t := range topics {
		if !t.IsDir || checkTopic(t.Name) != nil {
			continue
		}
		ids, err := fsys.ReadDir(filepath.Join(dir, t.Name))
		if err != nil {
			return 0, false, fmt.Errorf("consumequeue: %w", err)
		}
		for _, q := range ids {
			if _, isQueue := parseQueueID(q.Name); !q.IsDir || !isQueue {
				continue
			}
			qdir := filepath.Join(dir, t.Name, q.Name)
			size, found, err := segment.DetectFileSize(fsys, qdir)
			if err != nil {
				return 0, false, fmt.Errorf("consumequeue %s/%s: %w", t.Name, q.Name, err)
			}
			if !found {
				continue
			}
			if size%UnitSize != 0 || size/UnitSize > (1<<31-1)/UnitSize {
				return 0, false, fmt.Errorf("consumequeue %s/%s: files of %d bytes are not a whole number of %d-byte units",
					t.Name, q.Name, size, UnitSize)
			}
			return int(size / UnitSize), true, nil
		}
	}
	return 0, false, nil
}
