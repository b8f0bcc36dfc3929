package main

import (
	"os"
	"time"

	"github.com/rs/zerolog"
)

// newLogger logs JSON to stderr, or human-readable lines when stderr is a terminal (or asked).
func newLogger(level, format string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	var w = zerolog.New(os.Stderr)
	if format == "console" || (format == "auto" && isTerminal(os.Stderr)) {
		w = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly})
	}
	return w.Level(lvl).With().Timestamp().Logger()
}

// isTerminal is the nats-server way of telling a terminal without a dependency.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
