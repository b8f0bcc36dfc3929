package engine

import (
	"context"
	"time"

	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
)

// saveTagsLater is the stage newIngress starts when a full disk kept it from saving the
// subject-tag set of new topics (subjecttags.Adopt): it tries again every
// OffsetPersistInterval until the set is saved, and once more when the pipeline stops.
func (e *Engine) saveTagsLater(ctx context.Context) error {
	tick := time.NewTicker(e.opts.OffsetPersistInterval)
	defer tick.Stop()
	done := e.dispatched.WaitChan(1<<63 - 1)
	for e.unsavedTags.Load() != nil {
		select {
		case <-tick.C:
			e.saveUnsavedTags()
		case <-done:
			e.saveUnsavedTags()
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// saveUnsavedTags saves the subject-tag set a full disk kept from being saved, if there is one.
func (e *Engine) saveUnsavedTags() {
	tags := e.unsavedTags.Load()
	if tags == nil {
		return
	}
	if err := subjecttags.Save(e.opts.FS, e.opts.Dir, tags); err != nil {
		if !vfs.IsNoSpace(err) {
			e.opts.Logger.Warn().Err(err).Msg("could not save the subject-tag rule of the new topics")
		}
		return
	}
	e.unsavedTags.CompareAndSwap(tags, nil)
	e.opts.Logger.Info().Strs("topics", tags.Topics()).Msg("subject-tag rule saved")
}
