package main

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/natsserver"
)

// newLogger logs JSON to stderr, or human-readable lines when stderr is a terminal (or asked),
// at the given level. It writes through the returned LevelWriter, so that `engine run` can make
// its level change while running (SIGHUP): run raises the logger's own level to trace and lets
// the writer decide (dynamicLogger). Every other command keeps the fixed level, so that what
// it does not log costs nothing but a level check: in particular an embedded nats-server
// traces only when the logger is at trace level.
func newLogger(level, format string) (zerolog.Logger, *natsserver.LevelWriter) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	var out io.Writer = os.Stderr
	if format == "console" || (format == "auto" && isTerminal(os.Stderr)) {
		out = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}
	}
	levels := natsserver.NewLevelWriter(out, lvl)
	return zerolog.New(levels).Level(lvl).With().Timestamp().Logger(), levels
}

// dynamicLogger is log with its level left to levels, the writer it logs through (newLogger):
// events below the writer's level are built and dropped there, so it is used only where the
// level must change while running.
func dynamicLogger(log zerolog.Logger) zerolog.Logger { return log.Level(zerolog.TraceLevel) }

// isTerminal is the nats-server way of telling a terminal without a dependency.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
