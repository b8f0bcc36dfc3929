package main

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
)

// newLogger logs JSON to stderr, or human-readable lines when stderr is a terminal (or asked).
// The level is the returned writer's, so that it can change while running (SIGHUP): the logger
// itself passes every level to it.
func newLogger(level, format string) (zerolog.Logger, *engine.LevelWriter) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	var out io.Writer = os.Stderr
	if format == "console" || (format == "auto" && isTerminal(os.Stderr)) {
		out = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}
	}
	levels := engine.NewLevelWriter(out, lvl)
	return zerolog.New(levels).Level(zerolog.TraceLevel).With().Timestamp().Logger(), levels
}

// isTerminal is the nats-server way of telling a terminal without a dependency.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
