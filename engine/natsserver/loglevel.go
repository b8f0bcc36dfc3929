package natsserver

import (
	"io"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// LevelWriter is a zerolog.LevelWriter whose level can change while the engine runs, without
// global state (zerolog.SetGlobalLevel is not used): build the engine's Logger on it at
// zerolog.TraceLevel, so that the writer decides what is written, and change the level with
// SetLevel, or with the engine's Server.SetLogLevel, which also turns the embedded
// nats-server's debug and trace logs on or off (Embedded.SetLogLevel). Give it to the engine's
// server as NATSOptions.LogLevels.
//
// Events below the level are built and then dropped here; the engine logs at debug and trace
// level only off its hot paths (and the embedded server's trace is off unless the level asks).
type LevelWriter struct {
	out   io.Writer
	level atomic.Int32
}

// NewLevelWriter writes to out the events at level or above.
func NewLevelWriter(out io.Writer, level zerolog.Level) *LevelWriter {
	w := &LevelWriter{out: out}
	w.level.Store(int32(level))
	return w
}

// Level is the level in force.
func (w *LevelWriter) Level() zerolog.Level { return zerolog.Level(w.level.Load()) }

// SetLevel changes the level; it is safe to call while events are written.
func (w *LevelWriter) SetLevel(level zerolog.Level) { w.level.Store(int32(level)) }

// Write writes p: zerolog calls WriteLevel; a plain Write (no level known) always passes.
func (w *LevelWriter) Write(p []byte) (int, error) { return w.out.Write(p) }

// WriteLevel writes p when level is at or above the level in force, and drops it otherwise.
func (w *LevelWriter) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	if level < w.Level() {
		return len(p), nil
	}
	if lw, ok := w.out.(zerolog.LevelWriter); ok {
		return lw.WriteLevel(level, p)
	}
	return w.out.Write(p)
}
