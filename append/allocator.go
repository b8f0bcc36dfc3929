package appender

import (
	"context"

	"github.com/rs/zerolog"
)

// Allocator prepares the next CommitLog segment ahead of need (fallocate, map, prefault), off
// the writer, so that a roll never waits for the disk. The appender kicks it when the segment
// being written is half full; it stops when the kick channel is closed.
type Allocator struct {
	// Warm, when set, runs once first: it prefaults the segment the writer starts in.
	Warm    func() error
	Prepare func() error
	Kick    <-chan struct{}
	Log     zerolog.Logger
	// Failed counts preparations that failed (a full disk): the writer then creates the segment
	// itself when it needs it, and gets the error there if the disk is still full.
	Failed func()
}

// Run serves kicks until the channel closes or ctx ends.
func (a *Allocator) Run(ctx context.Context) error {
	if a.Warm != nil {
		if err := a.Warm(); err != nil {
			a.Log.Warn().Err(err).Msg("could not prefault the active commitlog segment")
		}
	}
	for {
		select {
		case _, ok := <-a.Kick:
			if !ok {
				return nil
			}
			if err := a.Prepare(); err != nil {
				a.Log.Warn().Err(err).Msg("could not allocate the next commitlog segment ahead")
				if a.Failed != nil {
					a.Failed()
				}
			}
		case <-ctx.Done():
			return nil
		}
	}
}
